"""Loading checkpoint tensors into the model through the weight map's canonical layout, part by part.

The model is one more layout of the one weight map (`build_weight_map(spec, "canonical")`, the MXFP4 experts kept
packed): its rows say which checkpoint tensor fills which buffer with which quirk transform
(`dayone.adapters.weightmap.quirks`), and they are walked with `walk.read_source` and `walk.region`, as the
conformance judge and Miles' converter walk theirs (`walk.to_target`; SGLang's and vLLM's TableLoader applies the same
`walk.unpad` and MXFP4 dequantization per streamed tensor). What is left here is what a checkpoint needs checked,
each failure an InputError naming the tensor: missing, wrong shape (expected and got), not uint8 / not float,
NaN/Inf, non-zero A_log padding, MXFP4 scale bytes that give NaN or Inf weights.
Derived tensors are recomputed after every load (`refresh_derived`), so they never go stale.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from dayone.adapters.model.module import SpecModule
from dayone.adapters.weightmap import WeightMap, build_weight_map, walk
from dayone.adapters.weightmap.quirks import is_mxfp4_scale_row, mxfp4_finite, mxfp4_twin
from dayone.core.errors import InputError
from dayone.spec.manifest import EntryTable, Manifest, build_manifest
from dayone.spec.schema import ModelSpec

Getter = Callable[[str], torch.Tensor]
WHOLE = walk.Parallel()  # the model runs unsharded: one rank holds every tensor whole


def canonical_map(spec: ModelSpec) -> WeightMap:
    """The canonical table of `spec`: every checkpoint tensor -> the model buffer it fills."""
    return build_weight_map(spec, "canonical", mxfp4="packed")


def bind_dtypes(model: SpecModule, table, checkpoint_dtype: str) -> None:
    """Check that the model holds every buffer the table fills, at the table's shape, and that the table fills every
    weight the model declares (mismatches are InputErrors). The table's dtypes: a weight the checkpoint stores in
    fp32 although the checkpoint is not fp32 (the spec's checkpoint.float32) stays fp32, MXFP4 bytes stay uint8; the
    rest keep the dtype their module declares (the tier's, or what an op takes)."""
    skipped = {(r.target, r.layers) for r in table.RULES if r.transform == "passthrough"}
    filled = set()
    for param in table.PARAMS:
        if (param.name, param.layers) in skipped:
            continue
        for layer in walk.layer_indices(table, param.layers):
            name = walk.fill(param.name, layer)
            owner, _, attr = name.rpartition(".")
            try:
                module = model.get_submodule(owner) if owner else model
            except AttributeError:
                module = None
            buffer = module._buffers.get(attr) if module is not None else None
            if buffer is None:
                raise InputError(f"{name}: a parameter of the canonical weight map that the model does not hold")
            if tuple(buffer.shape) != tuple(param.shape):
                raise InputError(
                    f"{name}: shape {list(param.shape)} in the canonical weight map, {list(buffer.shape)} in the model"
                )
            singled_out = param.dtype == "float32" and checkpoint_dtype != "float32"
            dtype = walk.DTYPES[param.dtype] if singled_out or param.dtype == "uint8" else buffer.dtype
            if buffer.dtype != dtype:
                module.register_buffer(attr, torch.empty(buffer.shape, dtype=dtype, device=buffer.device))
            filled.add(name)
    for owner, module in model.named_modules():
        if isinstance(module, SpecModule):
            for attr in module.roles.values():
                name = f"{owner}.{attr}" if owner else attr
                if name not in filled:
                    raise InputError(f"{name}: a weight of the model that the canonical weight map does not fill")


class RowsByLayer:
    """`rows[layer]`: the table's rows of one layer (None: the globals) in table order, as `walk.rows` gives them,
    made when asked (a K3 table has ~500k rows, nearly all experts; a streamed load wants one layer's at a time).
    Passthrough rows (a vision tower) are left out: the text model does not hold them."""

    def __init__(self, table) -> None:
        self.table, self.params = table, walk.params_by_name(table)

    def __getitem__(self, layer: int | None) -> list[walk.Row]:
        out = []
        for rule in self.table.RULES:
            if rule.transform == "passthrough" or layer not in walk.layer_indices(self.table, rule.layers):
                continue
            param = self.params[(rule.target, rule.layers)]
            experts = range(self.table.NUM_EXPERTS) if "{e}" in rule.source else (None,)
            out.extend(walk.Row(walk.fill(rule.source, layer, e), rule.target, rule, param, layer, e) for e in experts)
        return out


class WeightLoader:
    """Fills a `SpecModel` from `get(name) -> tensor` (e.g. a dict's __getitem__, a lazy safetensors reader).

    Parts load independently: `load_globals` (embedding, head), `load_layer(i)`; `load` does all of them.
    It walks the spec's canonical weight map, the one `SpecModel` binds its buffers to (MXFP4 kept packed).
    """

    def __init__(self, spec: ModelSpec, get: Getter, manifest: Manifest | None = None, device="cpu") -> None:
        self.spec, self.get, self.device = spec, get, torch.device(device)
        self.entries = EntryTable(manifest if manifest is not None else build_manifest(spec))
        self.table = canonical_map(spec)
        self.by_layer = RowsByLayer(self.table)

    def load(self, model) -> None:
        self.load_globals(model)
        for i in range(len(model.layers)):
            self.load_layer(model, i)

    def load_globals(self, model) -> None:
        """The embedding and the head (final aggregate, norm, lm_head)."""
        self.load_embedding(model)
        self.load_head(model)

    def load_embedding(self, model) -> None:
        self._load_part(model, model.embed_tokens, "embed_tokens.")

    def load_head(self, model) -> None:
        self._load_part(model, model.head, "head.")

    def _load_part(self, model, part: SpecModule, prefix: str) -> None:
        self._materialise(part)
        self._fill(model, [row for row in self.by_layer[None] if row.target.startswith(prefix)])
        part.refresh_derived()

    def load_layer(self, model, i: int) -> None:
        layer = model.layers[i]
        self._materialise(layer)
        self._fill(model, self.by_layer[i])
        layer.refresh_derived()

    def _materialise(self, part: SpecModule) -> None:
        if any(b.is_meta for b in part.buffers()):
            part.to_empty(device=self.device)

    def _fetch(self, name: str) -> torch.Tensor:
        try:
            t = self.get(name)
        except KeyError:
            t = None
        if t is None:
            raise InputError(f"{name}: missing from the checkpoint")
        shape, dtype, _ = self.entries.get(name)
        if list(t.shape) != shape:
            raise InputError(f"{name}: shape {shape} expected, got {list(t.shape)}")
        if dtype == "U8":
            if t.dtype != torch.uint8:
                raise InputError(f"{name}: dtype uint8 expected, got {str(t.dtype).removeprefix('torch.')}")
        elif not t.is_floating_point():
            raise InputError(f"{name}: a float tensor expected, got {str(t.dtype).removeprefix('torch.')}")
        elif not bool(torch.isfinite(t).all()):
            raise InputError(f"{name}: contains NaN or Inf")
        return t

    def _buffer(self, model, row: walk.Row) -> torch.Tensor:
        name = walk.local_name(self.table, row, WHOLE)
        try:
            return model.get_buffer(name)
        except AttributeError:
            raise InputError(f"{row.source}: fills {name}, which is not a weight of the model") from None

    def _fill(self, model, rows: list[walk.Row]) -> None:
        with torch.no_grad():
            for row in rows:
                try:
                    value = walk.read_source(row, self._fetch)
                except ValueError as err:  # a quirk the tensor breaks (non-zero A_log padding)
                    raise InputError(str(err)) from None
                target = self._buffer(model, row)[walk.region(self.table, row, WHOLE)]
                target.copy_(value.reshape(target.shape))
            by_source = {row.source: row for row in rows}
            for row in filter(is_mxfp4_scale_row, rows):  # each pair checked once both halves are in
                packed_row = by_source[mxfp4_twin(row.source)]
                packed = self._buffer(model, packed_row)[walk.region(self.table, packed_row, WHOLE)]
                scale = self._buffer(model, row)[walk.region(self.table, row, WHOLE)]
                if not mxfp4_finite(packed, scale):
                    raise InputError(f"{row.source}: scale bytes give NaN or Inf weights")


def load_checkpoint_dir(model, spec: ModelSpec, path) -> None:
    """Load every *.safetensors file under `path` into `model` (small checkpoints; tests and examples)."""
    from pathlib import Path

    from safetensors.torch import load_file

    tensors: dict[str, torch.Tensor] = {}
    for f in sorted(Path(path).glob("*.safetensors")):
        tensors.update(load_file(f))
    WeightLoader(spec, tensors.__getitem__).load(model)
