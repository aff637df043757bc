"""Helpers shared by the validation tests (fixtures live in conftest.py)."""

from __future__ import annotations

from pathlib import Path

# Subprocesses get one thread each: on a shared 2-core machine two OpenMP threads per process spin against each
# other and every tiny matmul slows 20x; results do not depend on it (validation compares within one process).
ONE_THREAD = {"OMP_NUM_THREADS": "1"}
SHORT_TOKENS = "[[5, 17, 42, 9, 77, 3, 120, 64, 8, 33, 91, 12], [250, 1, 0, 45, 45, 200, 7, 19, 99, 128, 6, 60]]"


def synthetic(path: Path, spec_name: str, layers: int | None = None, seed: int = 0) -> Path:
    from dayone.spec.registry import load_spec
    from dayone.synth import scaled_spec, write_synthetic

    write_synthetic(scaled_spec(load_spec(spec_name), "tiny", layers), path, seed=seed)
    return path


def opened(path: Path, spec_arg: str | None = None):
    """A checkpoint and its spec as `integrate validate` parses them at its entry: opened once, the spec from --spec
    or derived from config.json."""
    from dayone.checkpoint import open_checkpoint
    from dayone.checkpoint.spec_source import spec_for_checkpoint

    checkpoint = open_checkpoint(str(path))
    return checkpoint, spec_for_checkpoint(checkpoint, spec_arg)


def validated(path: Path, options, spec_arg: str | None = None) -> dict:
    """`validate` called as the command calls it, the report in the JSON form the command writes (what the
    dashboard and the release workflow read)."""
    from dayone.validate import validate

    report = validate(*opened(path, spec_arg), options).report
    assert report is not None  # one process: its only rank holds the report
    return report.model_dump(mode="json")


def source_of(path: Path):
    """validate's Source for a checkpoint folder (opened, its spec derived from config.json, coverage checked)."""
    from dayone.validate.source import open_source

    return open_source(*opened(path))
