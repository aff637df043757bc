"""A session program's jobs (sglang_session.py, vllm_session.py): read from JOBS.json, every probe first, then the
forwards of each run whose probe failed no level (a run: one adapter at one world size, its jobs sharing their
"run" key; one session may hold several adapters' runs)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path


def read_jobs(argv: list[str] | None, description: str) -> list[dict]:
    """The jobs of `--jobs JOBS.json`: [{"kind": "probe" | "forward", "run", "world_size", "out", "argv"}, ...]."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--jobs", type=Path, required=True, help="a JSON list of probe and forward jobs")
    return json.loads(parser.parse_args(argv).jobs.read_text())


def run_jobs(jobs: list[dict], probe: Callable[[list[str]], object], forward: Callable[[list[str]], object]) -> int:
    """Each job's program called with its own arguments: every probe first, in order, then the forwards of each run
    whose probe failed no level. The probes come first because each is forked from this process, which must not
    have run a torch operation yet (its OpenMP pool would be inherited half-made), while a forward may run here."""
    failed = set()
    for job in jobs:
        if job["kind"] == "probe":
            probe(job["argv"])
            if not probe_passed(Path(job["out"])):
                failed.add(job["run"])
    for job in jobs:
        if job["kind"] == "forward" and job["run"] not in failed:
            forward(job["argv"])
    return 0


def probe_passed(out: Path) -> bool:
    """Whether the probe wrote its levels with none failed: the forwards after a failed probe would load what the
    probe could not, and the driver judges none of them (forward is "not run" after a failed level)."""
    try:
        levels = json.loads((out / "levels.json").read_text())["levels"]
    except (OSError, ValueError, KeyError, TypeError):
        return False
    return all(isinstance(level, dict) and level.get("status") != "fail" for level in levels.values())
