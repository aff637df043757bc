"""Synthetic checkpoints with real weights, in a release's exact format, before the release exists.

    spec = scaled_spec(load_spec("kimi-k3"), "tiny")          # widths scaled, structure kept
    spec = scaled_spec(load_spec("kimi-k3"), "faithful")      # every per-head / per-expert width kept, fewer layers
    write_synthetic(spec, "out/k3-tiny", seed=0)               # names, dtypes, shards, config.json, MXFP4 experts

Weights are drawn per tensor from (seed, name), scaled so activations stay well-scaled through every layer
(see draw.py for the reasoning behind each scale).
"""

from __future__ import annotations

import importlib

# Imported on first use (PEP 562): the weight drawing and writing need torch, and `integrate run` reaches
# dayone.synth.stand_in (a stand-in's name) in a fully cached run, which must not import torch.
_HOMES = {
    "SCALES": "scale", "SCALE_NAMES": "scale", "Scale": "scale", "scaled_spec": "scale",
    "faithful_spec": "faithful",
    "SyntheticData": "write", "write_synthetic": "write",
    "WeightDraw": "draw",
}  # fmt: skip
__all__ = [
    "SCALES",
    "SCALE_NAMES",
    "Scale",
    "SyntheticData",
    "WeightDraw",
    "faithful_spec",
    "scaled_spec",
    "write_synthetic",
]


def __getattr__(name: str):
    if name not in _HOMES:
        raise AttributeError(f"module 'dayone.synth' has no attribute {name!r}")
    return getattr(importlib.import_module(f"dayone.synth.{_HOMES[name]}"), name)
