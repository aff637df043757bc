"""Passing Megatron check reports kept across runs, so that the same check of the same inputs runs once.

A check's report is decided by the spec, dayone's code that builds and checks the model (the programs, what they
import, the templates and adapters they generate from), the peer's releases, the packages of the interpreter that
runs them and its thread count. All of that is the key, so a report is reused only where running the check again would
compute it from the same inputs: a README run and the release workflow's run of the same commit, or the runs of one
checkpoint into several folders, each paid 9 to 12 s of CPU for the same verdict. Only passes are kept: a failure
runs again and shows its output fresh. The reports live in $DAYONE_CACHE/megatron-checks (default
~/.cache/dayone/megatron-checks); deleting the folder makes every check run again.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from importlib import metadata
from pathlib import Path

from dayone.core.atomic import write_atomic
from dayone.core.cache import cache_root
from dayone.programs.megatron.checks import PROGRAMS

# What the checks run: their programs (their dayone imports are followed), the batch, and what they generate from.
CODE = (*PROGRAMS.values(), "dayone.programs.megatron.batch", "dayone.templates.*", "dayone.adapters.*")
# Packages of the main interpreter the checks import (the peer's own are read off its folder).
MAIN_PACKAGES = ("torch", "numpy", "safetensors")


def folder() -> Path:
    return cache_root() / "megatron-checks"


def key(spec_json: str, check: str, peer: Path) -> str:
    from dayone.run.code import code_digest

    material = {
        "spec": spec_json,
        "check": check,
        "code": code_digest(CODE),
        "python": sys.version,
        "main": {name: _version(name) for name in MAIN_PACKAGES},
        "peer": sorted(p.name for p in peer.glob("*.dist-info")),
        "threads": os.environ.get("OMP_NUM_THREADS", ""),
    }
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()


def kept(digest: str) -> dict | None:
    """The passing report kept under this key, or None."""
    path = folder() / f"{digest}.json"
    try:
        report = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return report if isinstance(report, dict) and report.get("status") == "pass" else None


def keep(digest: str, report: dict) -> None:
    """Keep a passing report (written to a temporary name and renamed); anything else is not kept."""
    if report.get("status") != "pass":
        return
    try:
        folder().mkdir(parents=True, exist_ok=True)
        # The report's own key order is kept: the reports a run writes from it are compared byte for byte.
        write_atomic(folder() / f"{digest}.json", json.dumps(report))
    except OSError:
        pass  # a read-only or full cache only costs the next run the check


def _version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return ""
