"""Write a synthetic checkpoint: the scaled spec's manifest, drawn weights, the release's shard style and config."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import torch
from dayone.checkpoint.writer import write_checkpoint
from dayone.kernels.mxfp4 import quantize_mxfp4
from dayone.spec.hf_config import to_hf_config
from dayone.spec.manifest import Manifest, Tensor, build_manifest
from dayone.spec.schema import ModelSpec
from dayone.synth.draw import TORCH_DTYPES, WeightDraw


def tensor_bytes(t: torch.Tensor) -> bytes:
    """The raw little-endian bytes of a tensor as safetensors stores them."""
    return t.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()


class SyntheticData:
    """`data` callback for write_checkpoint: manifest entry -> bytes. MXFP4 pairs are quantized from one draw."""

    def __init__(self, spec: ModelSpec, seed: int) -> None:
        self.draw = WeightDraw(spec, seed)
        self._pair: tuple[str, tuple[torch.Tensor, torch.Tensor]] | None = None

    def tensor(self, t: Tensor) -> torch.Tensor:
        if t.role.endswith((".packed", ".scale")):
            base = t.name.rsplit(".", 1)[0]  # "...experts.5.w1"
            if self._pair is None or self._pair[0] != base:
                self._pair = (base, quantize_mxfp4(self.draw(t, name=base)))
            packed, scale = self._pair[1]
            return packed if t.role.endswith(".packed") else scale
        return self.draw(t).to(TORCH_DTYPES[t.dtype])

    def __call__(self, t: Tensor) -> bytes:
        return tensor_bytes(self.tensor(t))


def write_synthetic(
    spec: ModelSpec,
    out_dir: Path,
    seed: int = 0,
    num_shards: int | None = None,
    overwrite: bool = False,
    progress: Callable[[int, int], None] | None = None,
) -> Manifest:
    """Write a checkpoint of `spec` (already scaled) with drawn weights into out_dir, atomically; returns its manifest."""
    manifest = build_manifest(spec)
    write_checkpoint(
        Path(out_dir),
        to_hf_config(spec),
        list(manifest.tensors),
        num_shards or spec.release.num_shards or 1,
        data=SyntheticData(spec, seed),
        overwrite=overwrite,
        progress=progress,
    )
    return manifest
