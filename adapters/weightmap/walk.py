"""Walk a weight table: checkpoint tensors <-> a framework's parameters, under tensor and expert parallelism.

A table (the `weight_table.py` beside this file in a generated package) holds:
    LAYERS       layer group -> 0-based layer indices ("kda", "mla", "dense", "moe")
    NUM_EXPERTS  routed experts per MoE layer
    PARAMS       every target parameter once (Param): full shape, fused parts, parallel rule
    RULES        every checkpoint tensor once (Rule): which parameter it fills, at which part, with which transform
    DERIVED      tensors computed from parameters after every load and update (Derived)
Names hold `{i}` (layer) and `{e}` (expert). Parameters are fused along dim 0 (dim 1 when stacked by expert):
a column-parallel fused parameter holds, on tensor-parallel rank r, the r-th slice of every part in order,
which is what Megatron's fused linears and SGLang/vLLM's merged linears keep; a part listed in `replicated_parts`
is held whole by every rank (vLLM's KDA in_proj keeps the low-rank gate input f_a so), and `align` pads each
rank's rows with zeros to a multiple (vLLM's aligned KDA in_proj).

This file depends on torch only: dayone ships it unchanged inside every generated package, and uses it itself.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import NamedTuple

import torch

from .mxfp4 import dequantize_mxfp4_reference, quantize_mxfp4

TP_RULES = ("replicated", "column", "row")


class Param(NamedTuple):
    """A target parameter, unsharded.

    shape: the full shape; an expert-stacked parameter ("stacked") has the expert as dim 0, a "named" one has
        `{e}` in its name (one parameter per expert, numbered locally on each expert-parallel rank).
    tp: replicated | column (dim 0 split over ranks, part by part) | row (dim 1 split).
    parts: sizes of the fused parts along dim 0 (None: one part).
    replicated_parts: parts of a column-parallel parameter that every rank holds whole, not split.
    align: a rank's rows of a column-parallel fused parameter are padded with zeros to a multiple of this; the
        padding follows the parts and no checkpoint tensor fills it.
    """

    name: str
    shape: tuple[int, ...]
    tp: str = "replicated"
    parts: tuple[int, ...] | None = None
    layers: str | None = None
    experts: str = ""
    dtype: str = "bfloat16"
    replicated_parts: tuple[int, ...] = ()
    align: int = 1


class Rule(NamedTuple):
    """One checkpoint tensor (pattern) and the parameter it fills.

    part: index into the parameter's parts (None: the whole parameter).
    shard: the framework loader's shard id (merged linears: the part; fused experts: "w1", "w3", "w2").
    transform: copy | a_log (drop the zero padding past the heads; pad back on the way out) |
        mxfp4 (source is `X.weight_packed`; with its `X.weight_scale` twin it is dequantized into the parameter).
    shape: the checkpoint tensor's shape (padded for A_log, packed bytes for MXFP4).
    """

    source: str
    target: str
    part: int | None = None
    shard: int | str | None = None
    transform: str = "copy"
    layers: str | None = None
    shape: tuple[int, ...] = ()


class Derived(NamedTuple):
    """A tensor recomputed from parameters: kind is one of DERIVE; inputs are parameter names."""

    name: str
    kind: str
    inputs: tuple[str, ...]
    layers: str | None = None
    dims: tuple[int, ...] = ()


class Row(NamedTuple):
    """One concrete checkpoint tensor of a table."""

    source: str
    target: str
    rule: Rule
    param: Param
    layer: int | None
    expert: int | None


class Parallel(NamedTuple):
    tp_rank: int = 0
    tp_size: int = 1
    ep_rank: int = 0
    ep_size: int = 1
    # Routed experts held whole by their expert-parallel rank, not split by tensor parallelism (expert tensor parallel
    # size 1: vLLM's --enable-expert-parallel); otherwise they are split over the tensor-parallel ranks as well.
    experts_whole: bool = False


DTYPES = {"bfloat16": torch.bfloat16, "float32": torch.float32, "float16": torch.float16, "uint8": torch.uint8}


def fill(pattern: str, layer: int | None = None, expert: int | None = None) -> str:
    return pattern.replace("{i}", str(layer)).replace("{e}", str(expert))


def layer_indices(table, group: str | None) -> tuple:
    return (None,) if group is None else tuple(table.LAYERS[group])


def params_by_name(table) -> dict[tuple[str, str | None], Param]:
    """(name, layer group) -> Param: KDA and MLA layers may both have a `self_attn.o_proj.weight`."""
    return {(p.name, p.layers): p for p in table.PARAMS}


def rows(table) -> Iterator[Row]:
    """Every checkpoint tensor of the table, in table order (experts innermost)."""
    params = params_by_name(table)
    for rule in table.RULES:
        param = params[(rule.target, rule.layers)]
        experts = range(table.NUM_EXPERTS) if "{e}" in rule.source else (None,)
        for layer in layer_indices(table, rule.layers):
            for expert in experts:
                yield Row(fill(rule.source, layer, expert), rule.target, rule, param, layer, expert)


def scale_name(packed_name: str) -> str:
    return packed_name.removesuffix("weight_packed") + "weight_scale"


def sources(row: Row) -> tuple[str, ...]:
    """The checkpoint tensors a row consumes (an MXFP4 pair for a dequantizing rule)."""
    return (row.source, scale_name(row.source)) if row.rule.transform == "mxfp4" else (row.source,)


# ----- shapes and ownership


def experts_per_rank(table, par: Parallel) -> int:
    if table.NUM_EXPERTS % par.ep_size:
        raise ValueError(f"{table.NUM_EXPERTS} experts do not split over {par.ep_size} expert-parallel ranks")
    return table.NUM_EXPERTS // par.ep_size


def owner(table, expert: int, par: Parallel) -> tuple[int, int]:
    """(expert-parallel rank, local index) of a routed expert."""
    per_rank = experts_per_rank(table, par)
    return expert // per_rank, expert % per_rank


def for_param(param: Param, par: Parallel) -> Parallel:
    """The parallel layout one parameter sees: a routed expert held whole has no tensor-parallel split."""
    return par._replace(tp_rank=0, tp_size=1) if par.experts_whole and param.experts else par


def experts_split_problem(table, tp_size: int) -> str | None:
    """Why the routed experts do not split over `tp_size` tensor-parallel ranks (None: they do), e.g. an MXFP4 scale
    row of one 32-element group, which no rank can hold half of."""
    for param in table.PARAMS:
        if param.experts:
            try:
                local_shape(table, param, Parallel(tp_size=tp_size))
            except ValueError as err:
                return str(err)
    return None


def split(size: int, tp_size: int, what: str) -> int:
    if size % tp_size:
        raise ValueError(f"{what}: {size} does not split over {tp_size} tensor-parallel ranks")
    return size // tp_size


def local_shape(table, param: Param, par: Parallel) -> tuple[int, ...]:
    """The shape one rank holds (alignment padding included)."""
    shape = list(param.shape)
    lead = 1 if param.experts == "stacked" else 0
    if param.experts == "stacked":
        shape[0] = experts_per_rank(table, par)
    if param.tp == "column" and param.parts:
        rows = sum(part_sizes(param, par.tp_size))
        shape[lead] = rows + padding(param, rows)
    elif param.tp == "column":
        shape[lead] = split(shape[lead], par.tp_size, param.name)
    elif param.tp == "row":
        shape[lead + 1] = split(shape[lead + 1], par.tp_size, param.name)
    return tuple(shape)


def part_split(param: Param, part: int | None) -> str:
    """How a part splits over tensor-parallel ranks: the parameter's rule, or replicated for a replicated part."""
    return "replicated" if part in param.replicated_parts else param.tp


def part_sizes(param: Param, tp_size: int = 1) -> tuple[int, ...]:
    """The rows each fused part has on one rank (tp_size 1: in the whole parameter)."""
    if param.tp != "column":
        return param.parts
    return tuple(
        size if k in param.replicated_parts else split(size, tp_size, f"{param.name} part {k}")
        for k, size in enumerate(param.parts)
    )


def padding(param: Param, rows: int) -> int:
    """Zero rows after the parts of a rank's aligned shard."""
    return -rows % param.align


def part_span(param: Param, part: int | None, tp_size: int = 1) -> tuple[int, int]:
    """(start, length) of a part along the fused dim of a rank's shard (column) or of the whole parameter."""
    lead = 1 if param.experts == "stacked" else 0
    if part is None:
        size = param.shape[lead]
        return 0, size // tp_size if param.tp == "column" else size
    sizes = part_sizes(param, tp_size)
    return sum(sizes[:part]), sizes[part]


def local_name(table, row: Row, par: Parallel) -> str:
    """The parameter name on the rank that holds this row (experts numbered locally when named)."""
    expert = row.expert
    if expert is not None and row.param.experts == "named":
        expert = owner(table, expert, par)[1]
    return fill(row.target, row.layer, expert)


def holds(table, row: Row, par: Parallel) -> bool:
    return row.expert is None or row.param.experts == "" or owner(table, row.expert, par)[0] == par.ep_rank


# ----- transforms


def read_source(row: Row, get: Callable[[str], torch.Tensor], dtype: torch.dtype | None = None) -> torch.Tensor:
    """The checkpoint tensor as the parameter takes it (padding dropped, MXFP4 dequantized, cast to dtype)."""
    value = get(row.source)
    if row.rule.transform == "mxfp4":
        value = dequantize_mxfp4_reference(value, get(scale_name(row.source)), dtype or DTYPES[row.param.dtype])
    elif row.rule.transform == "a_log":
        value = unpad(row.source, value, part_rows(row))
    if dtype is not None and value.is_floating_point():
        value = value.to(dtype)
    return value


def part_rows(row: Row) -> int:
    lead = 1 if row.param.experts == "stacked" else 0
    return part_span(row.param, row.rule.part)[1] if row.rule.part is not None else row.param.shape[lead]


def unpad(name: str, value: torch.Tensor, heads: int) -> torch.Tensor:
    flat = value.reshape(-1)
    if flat.numel() > heads and bool((flat[heads:] != 0).any()):
        bad = heads + int(torch.nonzero(flat[heads:] != 0)[0])
        raise ValueError(f"{name}: padding entries {heads}..{flat.numel() - 1} must be zero, index {bad} is not")
    return flat[:heads]


def pad(value: torch.Tensor, shape: tuple[int, ...]) -> torch.Tensor:
    out = value.new_zeros(int(torch.Size(shape).numel()))
    out[: value.numel()] = value.reshape(-1)
    return out.view(shape)


def shard(row: Row, value: torch.Tensor, par: Parallel) -> torch.Tensor:
    """This tensor-parallel rank's slice of a source tensor (its part of the parameter)."""
    tp = part_split(row.param, row.rule.part)
    if tp == "column":
        size = split(value.shape[0], par.tp_size, row.source)
        return value[par.tp_rank * size : (par.tp_rank + 1) * size]
    if tp == "row":
        size = split(value.shape[1], par.tp_size, row.source)
        return value[:, par.tp_rank * size : (par.tp_rank + 1) * size]
    return value


def region(table, row: Row, par: Parallel) -> tuple:
    """Index of a row's slice inside the rank-local parameter."""
    start, length = part_span(row.param, row.rule.part, par.tp_size)
    rows_ = slice(start, start + length)
    if row.param.experts == "stacked":
        return (owner(table, row.expert, par)[1], rows_)
    return (rows_,)


# ----- whole-table walks


def to_target(
    table,
    get: Callable[[str], torch.Tensor],
    par: Parallel | None = None,
    dtype: torch.dtype | None = None,
    on_write: Callable[[str, tuple, Row], None] | None = None,
) -> dict[str, torch.Tensor]:
    """Checkpoint -> the parameters one rank holds (HF -> framework load, honouring TP and EP; default one rank)."""
    par = par or Parallel()
    out: dict[str, torch.Tensor] = {}
    for row in rows(table):
        if not holds(table, row, par):
            continue
        at = for_param(row.param, par)
        value = shard(row, read_source(row, get, dtype), at)
        name = local_name(table, row, at)
        if name not in out:
            param_dtype = value.dtype if value.dtype == torch.uint8 else (dtype or value.dtype)
            new = torch.zeros if row.param.align > 1 else torch.empty  # alignment padding stays zero
            out[name] = new(local_shape(table, row.param, at), dtype=param_dtype)
        index = region(table, row, at)
        out[name][index] = value.reshape(out[name][index].shape)
        if on_write is not None:
            on_write(name, index, row)
    return out


def full_param(table, row: Row, shards: dict, size: Parallel) -> torch.Tensor:
    """The whole parameter a row lives in, joined from every rank's shard (`shards[(tp_rank, ep_rank)]`)."""
    tp = range(size.tp_size)
    if row.param.experts == "named":
        ep = owner(table, row.expert, size)[0]
        name = local_name(table, row, size)
        return _join(row.param, [shards[(t, ep)][name] for t in tp], lead=0)
    name = fill(row.target, row.layer)
    if row.param.experts == "stacked":
        return torch.cat([_join(row.param, [shards[(t, ep)][name] for t in tp], lead=1) for ep in range(size.ep_size)])
    return _join(row.param, [shards[(t, 0)][name] for t in tp], lead=0)


def _join(param: Param, per_tp: list[torch.Tensor], lead: int) -> torch.Tensor:
    """The whole parameter from its tensor-parallel shards: column parts rejoined part by part, replicated parts
    taken from rank 0, alignment padding dropped."""
    if param.tp == "replicated" or (len(per_tp) == 1 and param.align == 1):
        return per_tp[0]
    if param.tp == "row":
        return torch.cat(per_tp, dim=lead + 1)
    if not param.parts:
        return torch.cat(per_tp, dim=lead)
    sizes = part_sizes(param, len(per_tp))
    pieces = [t.narrow(lead, 0, sum(sizes)).split(sizes, dim=lead) for t in per_tp]
    held = [pieces[:1] if k in param.replicated_parts else pieces for k in range(len(sizes))]
    return torch.cat([piece[k] for k, ranks in enumerate(held) for piece in ranks], dim=lead)


def from_full(row: Row, full: torch.Tensor, requantize: bool = True) -> dict[str, torch.Tensor]:
    """The checkpoint tensor(s) of a row, cut from its whole parameter: the inverse of read_source + placement."""
    start, length = part_span(row.param, row.rule.part)
    lead = 1 if row.param.experts == "stacked" else 0
    value = full.narrow(lead, start, length)
    if row.param.experts == "stacked":
        value = value[row.expert]
    if row.rule.transform == "mxfp4":
        if not requantize:
            return {row.source.removesuffix("_packed"): value}
        packed, scale = quantize_mxfp4(value)
        return {row.source: packed, scale_name(row.source): scale}
    if row.rule.transform == "a_log":
        value = pad(value, row.rule.shape)
    return {row.source: value}


def to_hf(
    table, shards: dict[tuple[int, int], dict[str, torch.Tensor]], size: Parallel, requantize: bool = True
) -> dict[str, torch.Tensor]:
    """Every rank's parameters -> checkpoint tensors (framework -> HF), the inverse of `to_target`.

    requantize: an MXFP4 rule gives back `weight_packed` + `weight_scale` (True) or the float `weight` (False).
    """
    out: dict[str, torch.Tensor] = {}
    key, full = None, None
    for row in rows(table):
        row_key = (row.target, row.layer, row.expert if row.param.experts == "named" else None)
        if row_key != key:
            key, full = row_key, full_param(table, row, shards, size)
        out.update(from_full(row, full, requantize))
    return out


# ----- one full parameter at a time (weight sync: a trainer gathers a parameter and sends it)


def _target_index(table) -> list[tuple[re.Pattern, list[Rule]]]:
    by_target: dict[tuple[str, str | None], list[Rule]] = {}
    for rule in table.RULES:
        by_target.setdefault((rule.target, rule.layers), []).append(rule)
    return [(_pattern(target), rules) for (target, _), rules in by_target.items()]


def _pattern(name: str) -> re.Pattern:
    text = re.escape(name).replace(r"\{i\}", r"(?P<i>\d+)").replace(r"\{e\}", r"(?P<e>\d+)")
    return re.compile(text + "$")


def match_target(table, name: str) -> tuple[list[Rule], int | None, int | None]:
    """The rules filling a (full, globally numbered) parameter name, with its layer and expert."""
    for pattern, rules in _target_index(table):
        found = pattern.match(name)
        if found:
            groups = found.groupdict()
            layer = int(groups["i"]) if groups.get("i") is not None else None
            expert = int(groups["e"]) if groups.get("e") is not None else None
            if layer is None or layer in layer_indices(table, rules[0].layers):
                return rules, layer, expert
    raise KeyError(f"{name}: not a parameter of this table")


def param_to_hf(table, name: str, full: torch.Tensor, requantize: bool = True) -> list[tuple[str, torch.Tensor]]:
    """One gathered parameter -> its checkpoint tensors, e.g. for update_weights_from_tensor after a train step.
    A stacked expert parameter yields every expert's tensors."""
    rules, layer, expert = match_target(table, name)
    param = params_by_name(table)[(rules[0].target, rules[0].layers)]
    experts = [expert] if expert is not None else ([None] if param.experts == "" else range(table.NUM_EXPERTS))
    out: list[tuple[str, torch.Tensor]] = []
    for rule in rules:
        for e in experts:
            row = Row(fill(rule.source, layer, e), rule.target, rule, param, layer, e)
            out.extend(from_full(row, full, requantize).items())
    return out


# ----- derived tensors


def derive(kind: str, inputs: list[torch.Tensor], dims: tuple[int, ...]) -> torch.Tensor:
    """The value of a derived tensor from its inputs' current values.

    mla_w_kc / mla_w_vc: kv_b [H*(nope+v), C] -> [H, nope, C] / [H, v, C] (dims = H, nope, v), absorbed MLA.
    res_combined: attention-residual norm [D] * proj [1, D] -> [D] fp32.
    fp32: an fp32 copy (router correction bias).
    """
    if kind in ("mla_w_kc", "mla_w_vc"):
        _, nope, v = dims  # heads: whatever this rank holds
        kv_b = inputs[0].view(-1, nope + v, inputs[0].shape[-1])
        return (kv_b[:, :nope] if kind == "mla_w_kc" else kv_b[:, nope:]).contiguous()
    if kind == "res_combined":
        return inputs[0].float() * inputs[1][0].float()
    if kind == "fp32":
        return inputs[0].float().clone()
    raise ValueError(f"unknown derived kind {kind!r}")


def derived_rows(table) -> Iterator[tuple[str, Derived, list[str]]]:
    for d in table.DERIVED:
        for layer in layer_indices(table, d.layers):
            yield fill(d.name, layer), d, [fill(name, layer) for name in d.inputs]
