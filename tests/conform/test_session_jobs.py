"""A session program's jobs (dayone.programs.engines.session_jobs): one engine process takes every world size's jobs,
runs every probe before the first forward (each probe is forked from that process, which must not have run a torch
operation yet), and runs a world size's forwards only where its probe failed no level."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import dayone.programs
import pytest

SESSION_JOBS = Path(dayone.programs.__file__).parent / "engines" / "session_jobs.py"


@pytest.fixture
def session_jobs():
    spec = importlib.util.spec_from_file_location("session_jobs", SESSION_JOBS)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def jobs_for(tmp_path: Path, worlds: dict[int, tuple[str, ...]]) -> list[dict]:
    """Per world size, as the driver lists them: its probe, then its forwards in each dtype."""
    jobs = []
    for world, dtypes in worlds.items():
        out = tmp_path / f"ws{world}"
        out.mkdir()
        jobs.append({"kind": "probe", "world_size": world, "out": str(out), "argv": [f"probe-{world}", str(out)]})
        jobs += [{"kind": "forward", "world_size": world, "out": str(out / d), "argv": [f"forward-{world}-{d}"]}
                 for d in dtypes]  # fmt: skip
    return jobs


def run(session_jobs, jobs: list[dict], failing: set[int]) -> list[str]:
    """The programs called, in order; the probe of each world size in `failing` writes a failed level."""
    called = []

    def probe(argv):
        called.append(argv[0])
        status = "fail" if int(argv[0].split("-")[1]) in failing else "pass"
        levels = {"discovered": {"status": "pass"}, "built": {"status": status}}
        (Path(argv[1]) / "levels.json").write_text(json.dumps({"levels": levels}))

    assert session_jobs.run_jobs(jobs, probe, lambda argv: called.append(argv[0])) == 0
    return called


def test_every_probe_runs_before_the_first_forward(session_jobs, tmp_path):
    jobs = jobs_for(tmp_path, {1: ("float32", "bfloat16"), 2: ("float32",)})
    assert run(session_jobs, jobs, failing=set()) == [
        "probe-1", "probe-2", "forward-1-float32", "forward-1-bfloat16", "forward-2-float32",
    ]  # fmt: skip


def test_a_failed_probe_stops_its_own_world_sizes_forwards_only(session_jobs, tmp_path):
    jobs = jobs_for(tmp_path, {1: ("float32", "bfloat16"), 2: ("float32",)})
    assert run(session_jobs, jobs, failing={1}) == ["probe-1", "probe-2", "forward-2-float32"]


def test_a_probe_that_wrote_nothing_counts_as_failed(session_jobs, tmp_path):
    jobs = jobs_for(tmp_path, {1: ("float32",), 2: ("float32",)})
    called = []
    session_jobs.run_jobs(jobs, lambda argv: called.append(argv[0]), lambda argv: called.append(argv[0]))
    assert called == ["probe-1", "probe-2"]
