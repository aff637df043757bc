"""Loading checkpoint tensors into the model, part by part, driven by the spec's manifest.

The loading boundary: every checkpoint quirk is translated here and nowhere else.
- A tensor goes to the module buffer registered under its manifest role (see `SpecModule.add_weight`).
- MXFP4 experts (`weight_packed` + `weight_scale`) are copied as bytes into a model that keeps them packed (each
  pair is dequantized once here to check it gives finite weights), or dequantized into a float expert stack.
- A_log is flattened; entries past num_heads are padding, must be zero, and are dropped.
- Checked, each failure an InputError naming the tensor: missing, wrong shape (expected and got), NaN/Inf,
  non-zero A_log padding, packed/scale not uint8.
Derived tensors are recomputed after every load (`refresh_derived`), so they never go stale.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable

import torch
from dayone.adapters.model.module import SpecModule
from dayone.core.errors import InputError
from dayone.spec.manifest import Manifest, Tensor, build_manifest
from dayone.spec.schema import ModelSpec

Getter = Callable[[str], torch.Tensor]


def dequantize_mxfp4(packed: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """weight_packed [out, in/2] u8 + weight_scale [out, in/group] u8 -> weight [out, in] fp32 (exact)."""
    from dayone.kernels.mxfp4 import dequantize_mxfp4 as dequant

    return dequant(packed, scale, torch.float32)


def _shape(t: torch.Tensor) -> list[int]:
    return list(t.shape)


class WeightLoader:
    """Fills a `SpecModel` from `get(name) -> tensor` (e.g. a dict's __getitem__, a lazy safetensors reader).

    Parts load independently: `load_globals` (embedding, head), `load_layer(i)`; `load` does all of them.
    """

    def __init__(self, spec: ModelSpec, get: Getter, manifest: Manifest | None = None, device="cpu") -> None:
        self.spec, self.get, self.device = spec, get, torch.device(device)
        manifest = manifest if manifest is not None else build_manifest(spec)
        self.by_layer: dict[int | None, list[Tensor]] = defaultdict(list)
        for t in manifest.tensors:
            if not t.role.startswith("passthrough"):
                self.by_layer[t.layer].append(t)

    def load(self, model) -> None:
        self.load_globals(model)
        for i in range(len(model.layers)):
            self.load_layer(model, i)

    def load_globals(self, model) -> None:
        """The embedding and the head (final aggregate, norm, lm_head)."""
        self.load_embedding(model)
        self.load_head(model)

    def load_embedding(self, model) -> None:
        self._load_part(model.embed_tokens)

    def load_head(self, model) -> None:
        self._load_part(model.head)

    def _load_part(self, part: SpecModule) -> None:
        targets = part.role_targets()
        self._materialise(part)
        self._fill(targets, [t for t in self.by_layer[None] if t.role in targets])
        part.refresh_derived()

    def load_layer(self, model, i: int) -> None:
        layer = model.layers[i]
        self._materialise(layer)
        self._fill(layer.role_targets(), self.by_layer[i])
        layer.refresh_derived()

    def _materialise(self, part: SpecModule) -> None:
        if any(b.is_meta for b in part.buffers()):
            part.to_empty(device=self.device)

    def _fetch(self, entry: Tensor) -> torch.Tensor:
        try:
            t = self.get(entry.name)
        except KeyError:
            t = None
        if t is None:
            raise InputError(f"{entry.name}: missing from the checkpoint")
        if tuple(t.shape) != tuple(entry.shape):
            raise InputError(f"{entry.name}: shape {list(entry.shape)} expected, got {_shape(t)}")
        if entry.dtype == "U8":
            if t.dtype != torch.uint8:
                raise InputError(f"{entry.name}: dtype uint8 expected, got {str(t.dtype).removeprefix('torch.')}")
        elif not t.is_floating_point():
            raise InputError(f"{entry.name}: a float tensor expected, got {str(t.dtype).removeprefix('torch.')}")
        elif not bool(torch.isfinite(t).all()):
            raise InputError(f"{entry.name}: contains NaN or Inf")
        return t

    def _fill(self, targets: dict[str, tuple[SpecModule, str]], entries: list[Tensor]) -> None:
        by_name = {t.name: t for t in entries}
        with torch.no_grad():
            for entry in entries:
                if entry.role.endswith(".scale"):
                    continue  # consumed with its weight_packed twin
                if entry.role.endswith(".packed"):
                    scale_entry = by_name[entry.name.removesuffix("weight_packed") + "weight_scale"]
                    packed, scale = self._fetch(entry), self._fetch(scale_entry)
                    value = dequantize_mxfp4(packed, scale)  # checked here, whatever the model keeps
                    if not bool(torch.isfinite(value).all()):
                        raise InputError(f"{scale_entry.name}: scale bytes give NaN or Inf weights")
                    scale_role = entry.role.removesuffix(".packed") + ".scale"
                    if entry.role in targets and scale_role in targets:  # the model keeps MXFP4 packed
                        for role_, raw in ((entry.role, packed), (scale_role, scale)):
                            module, attr = targets[role_]
                            getattr(module, attr)[entry.expert].copy_(raw)
                        continue
                    role = entry.role.removesuffix(".packed")
                else:
                    value, role = self._fetch(entry), entry.role
                if role not in targets:
                    raise InputError(f"{entry.name}: role {role!r} has no place in the model")
                module, attr = targets[role]
                target = getattr(module, attr)
                if role == "kda.a_log":
                    value = self._strip_a_log(entry.name, value, target.shape[0])
                if entry.expert is not None:
                    target = target[entry.expert]
                target.copy_(value.reshape(target.shape))

    @staticmethod
    def _strip_a_log(name: str, value: torch.Tensor, heads: int) -> torch.Tensor:
        flat = value.reshape(-1)
        padding = flat[heads:]
        if padding.numel() and bool((padding != 0).any()):
            bad = int(torch.nonzero(padding != 0)[0]) + heads
            raise InputError(f"{name}: padding entries {heads}..{flat.numel() - 1} must be zero, index {bad} is not")
        return flat[:heads]


def load_checkpoint_dir(model, spec: ModelSpec, path) -> None:
    """Load every *.safetensors file under `path` into `model` (small checkpoints; tests and examples)."""
    from pathlib import Path

    from safetensors.torch import load_file

    tensors: dict[str, torch.Tensor] = {}
    for f in sorted(Path(path).glob("*.safetensors")):
        tensors.update(load_file(f))
    WeightLoader(spec, tensors.__getitem__).load(model)
