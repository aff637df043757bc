"""Helpers for the generated-adapter tests: a tiny K3 that splits over 8 tensor-parallel ranks, a release-format
checkpoint writer, and importing modules of generated packages."""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "model"))

from model_fixtures import tiny_k3_spec, with_updates


def parallel_k3_spec(num_layers: int = 5):
    """Every K3 feature at tiny widths that split over TP 8 and EP 2: 8 KDA and MLA heads, A_log padded 8 -> 12,
    gate rank = head_dim (as vLLM's KDA layer needs), expert intermediate 256 (its MXFP4 scale columns split over 8
    ranks), the shared experts as wide (config.json sizes them by moe_intermediate_size: the spec its checkpoint's
    config derives is this one)."""
    base = tiny_k3_spec(num_layers)
    return with_updates(
        base,
        {"kda": {"num_heads": 8, "head_dim": 8, "a_log_shape": [12], "gate": {"rank": 8}}, "mla": {"num_heads": 8},
         "moe": {"expert_intermediate_size": 256, "shared_intermediate_size": 256 * base.moe.num_shared_experts}},
    )  # fmt: skip


def write_release(path: Path, spec, tensors: dict[str, torch.Tensor], shards: int = 3) -> dict[str, torch.Tensor]:
    """Write `tensors` as a release-format checkpoint with dayone's writer, read it back (what the tests consume)."""
    from dayone.checkpoint.writer import write_checkpoint
    from dayone.spec.hf_config import to_hf_config
    from dayone.spec.manifest import build_manifest
    from safetensors.torch import load_file

    manifest = build_manifest(spec).tensors

    def data(t) -> bytes:
        return tensors[t.name].contiguous().view(torch.uint8).numpy().tobytes()

    write_checkpoint(path, to_hf_config(spec), list(manifest), shards, data)
    back: dict[str, torch.Tensor] = {}
    for f in sorted(path.glob("*.safetensors")):
        back.update(load_file(f))
    return back


def load(root: Path, module: str):
    """A module of a generated package (its __init__, which may import the framework, is not run)."""
    from dayone.checks.static import load_generated

    return load_generated(root, module)
