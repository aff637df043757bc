"""Check a table (a WeightMap, or a generated weight_table.py) against the spec and the framework contracts.

Every problem names the checkpoint tensor or parameter it is about:
- coverage: every checkpoint tensor of the manifest is consumed by exactly one rule, and nothing else is;
- shapes: each tensor, after its transform, fits its part of the parameter; fused parts tile the parameter;
- splits: each parameter (each part of a fused one) splits over tensor-parallel ranks as its members' dims call for
  (contracts.SPLIT);
- order: fused parts sit where their consumer reads them (contracts.consumer_order), expert shard ids are
  FusedMoE's (w1 gate, w3 up, w2 down);
- derived: every tensor an engine derives from weights is listed for recomputation after loads and updates.
"""

from __future__ import annotations

from collections import Counter, defaultdict

from dayone.adapters.weightmap import walk
from dayone.adapters.weightmap.build import _patterns, layer_groups
from dayone.adapters.weightmap.contracts import base_role, consumer_order, reading_key, split_of
from dayone.adapters.weightmap.layouts import ENGINE_LAYOUTS
from dayone.adapters.weightmap.layouts import FUSED_MOE_SHARD as EXPERT_SHARD
from dayone.spec.manifest import build_manifest
from dayone.spec.schema import ModelSpec


def check_table(table, spec: ModelSpec, limit: int = 20) -> list[str]:
    """Problems of `table` for `spec`, at most `limit` (each names a tensor); [] when the table is right."""
    problems: list[str] = []
    for check in (_coverage, _placement, _splits, _order, _derived):
        problems.extend(check(table, spec))
        if len(problems) >= limit:
            break
    return problems[:limit]


def _first(table, rule) -> str:
    """The rule's first concrete checkpoint tensor (messages name a real tensor, not a pattern)."""
    layers = walk.layer_indices(table, rule.layers)
    return walk.fill(rule.source, layers[0] if layers else None, 0)


def _roles(spec: ModelSpec) -> dict[tuple[str, str | None], str]:
    """(source pattern, layer group) -> role: KDA and MLA layers both have a `self_attn.o_proj.weight`."""
    groups = {layers: name for name, layers in reversed(list(layer_groups(spec).items()))}
    return {
        (source, None if layers is None else groups.get(tuple(sorted(layers)))): role
        for source, role, _, _, layers in _patterns(spec)
    }


def _coverage(table, spec: ModelSpec) -> list[str]:
    expected = build_manifest(spec).expected()
    # One count over every name (Counter's C loop): the full K3's table has half a million rows.
    consumed = Counter(name for row in walk.rows(table) for name in walk.sources(row))
    problems = [f"{name}: no rule consumes it" for name in expected if name not in consumed]
    problems += [f"{name}: consumed {n} times (by {n} rules)" for name, n in consumed.items() if n > 1]
    problems += [f"{name}: not a tensor of a {spec.name} checkpoint" for name in consumed if name not in expected]
    return problems


def _placement(table, spec: ModelSpec) -> list[str]:
    problems = []
    params = walk.params_by_name(table)
    parts: dict[str, Counter] = defaultdict(Counter)
    for rule in table.RULES:
        param = params.get((rule.target, rule.layers))
        if param is None:
            problems.append(f"{rule.source}: fills {rule.target}, which the table does not declare")
            continue
        lead = 1 if param.experts == "stacked" else 0
        if rule.part is not None and (param.parts is None or not 0 <= rule.part < len(param.parts)):
            problems.append(f"{rule.source}: part {rule.part} of {param.name}, which has parts {param.parts}")
            continue
        rows = param.parts[rule.part] if rule.part is not None else param.shape[lead]
        if rule.transform == "a_log":
            fits = _numel(rule.shape) >= rows
            got = (rows,)
        elif rule.transform == "mxfp4":
            got, fits = (rule.shape[0], rule.shape[1] * 2), True
        else:
            got, fits = tuple(rule.shape), True
        want = (rows, *param.shape[lead + 1 :])
        if not fits or tuple(got) != want:
            problems.append(
                f"{_first(table, rule)}: shape {list(got)} does not fit {param.name} part {rule.part} {list(want)}"
            )
        parts[(param.name, param.layers)][rule.part] += 1
    for (name, layers), param in params.items():
        got = parts.get((name, layers), Counter())
        want = range(len(param.parts)) if param.parts else [None]
        for part in want:
            if got[part] != 1:
                problems.append(f"{name}: part {part} is filled by {got[part]} rules, expected 1")
        if param.parts and sum(param.parts) != param.shape[1 if param.experts == "stacked" else 0]:
            problems.append(f"{name}: parts {param.parts} do not add up to its shape {list(param.shape)}")
    return problems


def _numel(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def _splits(table, spec: ModelSpec) -> list[str]:
    problems = []
    roles, params = _roles(spec), walk.params_by_name(table)
    dims = {"column": "dim 0 (column)", "row": "dim 1 (row)", "replicated": "no dim (replicated)"}
    for rule in table.RULES:
        role, param = roles.get((rule.source, rule.layers)), params.get((rule.target, rule.layers))
        if role is None or param is None:
            continue
        # Megatron keeps whole experts per rank (expert tensor parallel size 1): spread by expert parallelism.
        allowed = {"replicated"} if param.experts == "named" else {split_of(role)}
        have = walk.part_split(param, rule.part)
        if have not in allowed:
            want = " or ".join(dims[a] for a in sorted(allowed))
            problems.append(
                f"{_first(table, rule)}: {param.name} splits it on {dims[have]}, its {role} dims call for {want}"
            )
    return problems


def _order(table, spec: ModelSpec) -> list[str]:
    problems = []
    roles = _roles(spec)
    by_param: dict[str, dict[int, tuple[str, str]]] = defaultdict(dict)
    for rule in table.RULES:
        role = roles.get((rule.source, rule.layers))
        if role is None:
            continue
        if rule.part is not None:
            by_param[(rule.target, rule.layers)][rule.part] = (_first(table, rule), reading_key(role))
        if role.startswith("moe.expert.") and rule.shard is not None:
            proj = base_role(role).split(".")[2]
            if rule.shard != EXPERT_SHARD[proj]:
                problems.append(
                    f"{_first(table, rule)}: loaded as shard {rule.shard!r} of {rule.target}, FusedMoE reads "
                    f"{rule.shard!r} as {_proj_of(rule.shard)} (the {proj} projection is {EXPERT_SHARD[proj]!r})"
                )
    for (name, _), parts in by_param.items():
        keys = [parts[k][1] for k in sorted(parts)]
        want = consumer_order(keys)
        if want is None:
            problems.append(f"{parts[min(parts)][0]}: fused into {name} with {keys}, which no consumer reads fused")
            continue
        for k, (have, expect) in enumerate(zip(keys, want)):
            if have != expect:
                problems.append(f"{parts[k][0]}: fills part {k} of {name}, which the consumer reads as {expect}")
    return problems


def _proj_of(shard: str) -> str:
    return {v: k for k, v in EXPERT_SHARD.items()}.get(shard, "nothing")


def required_derived(spec: ModelSpec, layout: str) -> list[tuple[str, str]]:
    """(derived kind, first input pattern) every table of `layout` must recompute for `spec`."""
    if layout not in ENGINE_LAYOUTS:
        return []
    p, out = spec.checkpoint.prefix, []
    if spec.mla is not None and "mla" in spec.attention_kinds:  # a section no layer uses has no tensors
        kv_b = f"{p}layers.{{i}}.self_attn.kv_b_proj.weight"
        out += [("mla_w_kc", kv_b), ("mla_w_vc", kv_b)]
    if spec.residual.kind == "attention":
        out += [
            ("res_combined", f"{p}layers.{{i}}.self_attention_res_norm.weight"),
            ("res_combined", f"{p}layers.{{i}}.mlp_res_norm.weight"),
            ("res_combined", f"{p}output_attn_res_norm.weight"),
        ]
    if spec.moe is not None and "moe" in spec.ffn_kinds and spec.moe.router.correction_bias:
        out.append(("fp32", f"{p}layers.{{i}}.{spec.checkpoint.moe_block}.gate.e_score_correction_bias"))
    return out


def _derived(table, spec: ModelSpec) -> list[str]:
    layout = getattr(table, "layout", None)  # a WeightMap names its layout; a generated table is told by its names
    if layout is None:
        layout = "inference" if table.DERIVED or any(".self_attn." in r.target for r in table.RULES) else "megatron"
    have = {(d.kind, d.inputs[0]) for d in table.DERIVED}
    groups = layer_groups(spec)
    problems = []
    for kind, source in required_derived(spec, layout):
        if (kind, source) not in have:
            layer = next(iter(groups.get("mla" if kind.startswith("mla") else "all", (0,))), 0)
            problems.append(f"{walk.fill(source, layer)}: its derived {kind} tensor is not recomputed after loads")
    return problems


def stale_derived(table, model) -> list[str]:
    """Derived tensors of a loaded engine model that are missing or differ from a recomputation from its current
    parameters (a load or weight update that skipped the refresh), each naming the tensor and its inputs."""
    import torch

    params = dict(model.named_parameters())
    problems = []
    for name, d, inputs in walk.derived_rows(table):
        if not all(i in params for i in inputs):
            continue
        owner, _, attr = name.rpartition(".")
        held = getattr(model.get_submodule(owner) if owner else model, attr, None)
        fresh = walk.derive(d.kind, [params[i].data for i in inputs], d.dims)
        if held is None:
            problems.append(f"{name}: never derived from {', '.join(inputs)}")
        elif held.shape != fresh.shape or not torch.equal(held, fresh):
            problems.append(f"{name}: stale, differs from what {', '.join(inputs)} now give")
    return problems
