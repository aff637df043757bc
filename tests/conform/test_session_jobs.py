"""A session program's jobs (dayone.programs.engines.session_jobs): one engine process takes every run's jobs (a run:
one adapter at one world size), runs every probe before the first forward (each probe is forked from that process,
which must not have run a torch operation yet), and runs a run's forwards only where its probe failed no level."""

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


def jobs_for(tmp_path: Path, worlds: dict[int, tuple[str, ...]], adapter: str = "") -> list[dict]:
    """Per world size, as the driver lists them: its probe, then its forwards in each dtype."""
    jobs = []
    for world, dtypes in worlds.items():
        out = tmp_path / f"{adapter}ws{world}"
        out.mkdir()
        run = {"run": str(out), "world_size": world}
        jobs.append({"kind": "probe", **run, "out": str(out), "argv": [f"{adapter}probe-{world}", str(out)]})
        jobs += [{"kind": "forward", **run, "out": str(out / d), "argv": [f"{adapter}forward-{world}-{d}"]}
                 for d in dtypes]  # fmt: skip
    return jobs


def run(session_jobs, jobs: list[dict], failing: set[str]) -> list[str]:
    """The programs called, in order; each probe named in `failing` writes a failed level."""
    called = []

    def probe(argv):
        called.append(argv[0])
        status = "fail" if argv[0] in failing else "pass"
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
    assert run(session_jobs, jobs, failing={"probe-1"}) == ["probe-1", "probe-2", "forward-2-float32"]


def test_a_failed_probe_stops_its_own_adapters_forwards_only(session_jobs, tmp_path):
    """Two adapters in one session, both at world size 1: a planted copy's failed probe leaves the other's forward."""
    jobs = jobs_for(tmp_path, {1: ("float32",)}, "a-") + jobs_for(tmp_path, {1: ("float32",)}, "b-")
    assert run(session_jobs, jobs, failing={"a-probe-1"}) == ["a-probe-1", "b-probe-1", "b-forward-1-float32"]


def test_a_probe_that_wrote_nothing_counts_as_failed(session_jobs, tmp_path):
    jobs = jobs_for(tmp_path, {1: ("float32",), 2: ("float32",)})
    called = []
    session_jobs.run_jobs(jobs, lambda argv: called.append(argv[0]), lambda argv: called.append(argv[0]))
    assert called == ["probe-1", "probe-2"]
