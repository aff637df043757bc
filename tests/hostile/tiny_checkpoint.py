"""The hostile-input tests' starting point: a tiny Kimi Linear checkpoint, written by `integrate synth` in process,
which each test module then damages in its own copy."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner
from dayone.cli import cli


def synthesize(tmp_path_factory, label: str, layers: int, shards: int = 1) -> Path:
    """A fresh tiny Kimi Linear of `layers` layers in `shards` shards (with an index), under a folder named `label`."""
    out = tmp_path_factory.mktemp(label) / "tiny"
    args = ["synth", "kimi-linear-48b-a3b", "--scale", "tiny", "--layers", str(layers), "--shards", str(shards)]
    result = CliRunner().invoke(cli, [*args, "-o", str(out)])
    assert result.exit_code == 0, result.output
    return out
