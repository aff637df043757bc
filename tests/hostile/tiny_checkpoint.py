"""The hostile-input tests' starting point: a tiny Kimi Linear checkpoint, written by `integrate synth` in process,
which each test module then damages in its own copy."""

from __future__ import annotations

from pathlib import Path

from checkpoints import synthesize


def tiny_kimi_linear(tmp_path_factory, label: str, layers: int, shards: int = 1) -> Path:
    """A fresh tiny Kimi Linear of `layers` layers in `shards` shards (with an index), under a folder named `label`."""
    out = tmp_path_factory.mktemp(label) / "tiny"
    return synthesize(out, "kimi-linear-48b-a3b", "--scale", "tiny", "--layers", layers, "--shards", shards)
