"""Checkpoints the tests start from, written by `integrate synth` in the test process: no interpreter start and torch
import per checkpoint (about 1.7 s of one core each), for tests about the commands that read them. Synth's own command
line is tested as a user runs it, in a subprocess (tests/synth)."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner
from dayone.cli import cli


def synthesize(out: Path, *args: object) -> Path:
    """`integrate synth ARGS -o OUT`, in process; returns OUT."""
    result = CliRunner().invoke(cli, ["synth", *map(str, args), "-o", str(out)])
    assert result.exit_code == 0, result.output
    return out
