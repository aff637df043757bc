"""Load checkpoint tensors into an inference engine's parameters by walking the weight table (SGLang and vLLM).

The engine contract, the same in both engines:
- a merged column-parallel linear's parameter has `weight_loader(param, weight, shard_id)` and slices its own
  tensor-parallel rank out of the full part (or keeps all of a part every rank holds: vLLM's KDA f_a; vLLM's packed
  KDA conv1d takes the same call);
- a FusedMoE parameter has `weight_loader(param, weight, weight_name, shard_id=..., expert_id=...)` with the
  global expert id ("w1" gate, "w3" up, "w2" down) and ignores experts another rank holds;
- any other parameter has `weight_loader(param, weight)` (sharded ones slice their rank) or none (copied whole).
A replicated fused parameter (MLA's q_a with kv_a) is assembled from its parts and written whole through its
weight_loader once a load has carried every part (vLLM's in-place reload counts what each layer's loaders write
and leaves a layer written around them with its old weights); parts of it a load carries alone are copied into
place. Derived tensors (absorbed MLA, attention-residual vectors, fp32 router bias) are recomputed for every
layer a load touched, from the parameters the model holds when the load ends (vLLM's reload swaps each layer's
parameters for placeholders while it loads, and puts its own back when the layer is complete), so they never go
stale after a weight update.

This file depends on torch only: dayone ships it unchanged inside the generated SGLang and vLLM packages.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import torch

from .walk import Param, Row, derive, derived_rows, fill, layer_indices, params_by_name, part_span, scale_name, unpad

_LAYER = re.compile(r"layers\.(\d+)\.")
_EXPERT = re.compile(r"experts\.(\d+)\.")


def pattern_of(name: str) -> tuple[str, int | None, int | None]:
    """A checkpoint name -> (its table pattern, layer, expert)."""
    layer = expert = None
    found = _LAYER.search(name)
    if found:
        layer = int(found.group(1))
        name = name[: found.start()] + "layers.{i}." + name[found.end() :]
    found = _EXPERT.search(name)
    if found:
        expert = int(found.group(1))
        name = name[: found.start()] + "experts.{e}." + name[found.end() :]
    return name, layer, expert


def _part_rows(tensor: torch.Tensor, decl: Param, part: int) -> torch.Tensor:
    """The rows of a fused parameter (or a tensor of its shape) that part `part` fills."""
    start, length = part_span(decl, part)
    return tensor.narrow(0, start, length)


class TableLoader:
    """Walks `table` into `model` (its named_parameters are the table's parameters on this rank)."""

    def __init__(self, table, model: torch.nn.Module) -> None:
        self.table, self.model = table, model
        self.params = dict(model.named_parameters())
        self.by_pattern: dict[str, list] = {}
        decls = params_by_name(table)
        for rule in table.RULES:
            self.by_pattern.setdefault(rule.source, []).append((rule, decls[(rule.target, rule.layers)]))
        self.pending: dict[str, torch.Tensor] = {}  # the first half of an MXFP4 pair, until its twin arrives
        self.parts: dict[str, dict[int, torch.Tensor]] = {}  # a replicated fused parameter's parts so far
        self.part_decls: dict[str, Param] = {}
        self.passed_through: set[str] = set()

    def row(self, name: str) -> Row | None:
        pattern, layer, expert = pattern_of(name)
        if pattern.endswith(".weight_scale") and pattern not in self.by_pattern:
            pattern = pattern.removesuffix("weight_scale") + "weight_packed"  # the twin of a dequantizing rule
        for rule, param in self.by_pattern.get(pattern, ()):
            if rule.layers is None or layer in layer_indices(self.table, rule.layers):
                return Row(fill(rule.source, layer, expert), rule.target, rule, param, layer, expert)
        return None

    def load(self, weights: Iterable[tuple[str, torch.Tensor]]) -> set[str]:
        """Load every (checkpoint name, tensor); returns the names of the parameters written (what vLLM's loader
        checks against the model's parameters). Nothing is skipped silently: a name the table does not know, or
        whose parameter the model does not hold, raises KeyError naming both; the table's passthrough tensors
        (a vision tower the text model does not hold) are recorded in `self.passed_through`."""
        written: set[str] = set()
        touched: set[int | None] = set()
        for name, tensor in weights:
            row = self.row(name)
            if row is None:
                raise KeyError(f"{name}: not a tensor of this model's weight table")
            target = fill(row.target, row.layer)
            if row.rule.transform == "passthrough":
                self.passed_through.add(name)
                continue
            if target not in self.params:
                raise KeyError(f"{name}: its parameter {target} is not a parameter of the model")
            value = self._value(row, name, tensor)
            if value is None:
                continue  # waiting for the other half of an MXFP4 pair
            if row.rule.part is not None and row.param.tp != "column" and row.param.experts != "stacked":
                self._gather_part(row, target, value)
            else:
                self._put(row, self.params[target], value)
            written.add(target)
            touched.add(row.layer)
        if self.pending:
            raise KeyError(f"{min(self.pending)}: the other half of its MXFP4 pair never arrived")
        for target, parts in self.parts.items():  # a partial update: only the parts it carried change
            param = self.params[target]
            for part, value in parts.items():
                with torch.no_grad():
                    _part_rows(param.data, self.part_decls[target], part).copy_(value.reshape(-1, *param.shape[1:]))
        self.parts.clear()
        self.refresh_derived(touched)
        return written

    def _value(self, row: Row, name: str, tensor: torch.Tensor) -> torch.Tensor | None:
        if row.rule.transform == "a_log":
            return unpad(name, tensor, row.param.shape[0])
        if row.rule.transform != "mxfp4":
            return tensor
        from .mxfp4 import dequantize_mxfp4_reference

        twin = scale_name(row.source) if name == row.source else row.source
        if twin not in self.pending:
            self.pending[name] = tensor
            return None
        other = self.pending.pop(twin)
        packed, scale = (tensor, other) if name == row.source else (other, tensor)
        return dequantize_mxfp4_reference(packed, scale, self.params[fill(row.target, row.layer)].dtype)

    def _put(self, row: Row, param: torch.nn.Parameter, value: torch.Tensor) -> None:
        loader = getattr(param, "weight_loader", None)
        if row.param.experts == "stacked":
            loader(param, value, row.source, shard_id=row.rule.shard, expert_id=row.expert)
        elif row.rule.part is not None and row.param.tp == "column":
            loader(param, value, row.rule.shard)
        elif loader is not None:
            loader(param, value)
        else:
            with torch.no_grad():
                param.data.copy_(value.reshape(param.shape))

    def _gather_part(self, row: Row, target: str, value: torch.Tensor) -> None:
        """Keep one part of a replicated fused parameter; with the last of its parts, write the whole parameter
        through its weight_loader (a direct copy without one)."""
        self.part_decls[target] = row.param
        parts = self.parts.setdefault(target, {})
        parts[row.rule.part] = value
        if len(parts) < len(row.param.parts):
            return
        del self.parts[target]
        param = self.params[target]
        whole = torch.zeros(param.shape, dtype=value.dtype)
        for part, part_value in parts.items():
            _part_rows(whole, row.param, part).copy_(part_value.reshape(-1, *param.shape[1:]))
        loader = getattr(param, "weight_loader", None)
        if loader is not None:
            loader(param, whole)
        else:
            with torch.no_grad():
                param.data.copy_(whole)

    def refresh_derived(self, layers: set[int | None] | None = None) -> dict[str, torch.Tensor]:
        """Recompute the derived tensors of `layers` (None: all) from the current parameters and set each on its
        module (`a.b.w_kc` -> model.a.b.w_kc); returns them by name."""
        out = {}
        params = dict(self.model.named_parameters())  # what the model holds now, not what it held at the start
        for name, d, inputs in derived_rows(self.table):
            layer = _LAYER.search(name)
            index = int(layer.group(1)) if layer else None
            if layers is not None and index not in layers:
                continue
            if all(i in params for i in inputs):
                out[name] = derive(d.kind, [params[i].data for i in inputs], d.dims)
        for name, value in out.items():
            owner, _, attr = name.rpartition(".")
            setattr(self.model.get_submodule(owner) if owner else self.model, attr, value)
        return out
