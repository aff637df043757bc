"""Run stages in order, each keyed by the hash of its inputs, each written atomically, so a rerun with nothing
changed only reads markers and a run killed at any moment (kill -9) resumes where it stopped.

OUT/stages/<name>/ holds a stage's files and, written last, stage.json {key, status, summary, outputs}. A stage is
built in OUT/stages/.<name>.partial and renamed into place; a leftover .partial is discarded. Stage files carry no
wall-clock times (timings go to OUT/logs/), so outputs are byte-identical to an uninterrupted run's.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from dayone.atomic import swap_in, write_atomic

STAGE_FILE = "stage.json"


@dataclass
class StageResult:
    status: str  # "pass" | "fail"
    summary: str
    outputs: dict = field(default_factory=dict)  # small, deterministic facts later stages and report.json use
    cached: bool = False
    seconds: float = 0.0


@dataclass(frozen=True)
class Stage:
    """name; inputs(): JSON-able facts that decide the outputs (file digests, options); run(workdir) -> result;
    after: the stages whose outputs it reads (their keys are part of its key, so it reruns when they change)."""

    name: str
    inputs: Callable[[], dict]
    run: Callable[[Path], StageResult]
    after: tuple[str, ...] = ()


def stage_key(stage: Stage, upstream: list[str], version: str) -> str:
    material = {"stage": stage.name, "dayone": version, "inputs": stage.inputs(), "upstream": upstream}
    return hashlib.sha256(json.dumps(material, sort_keys=True, default=str).encode()).hexdigest()


def run_stages(
    stages: list[Stage], out: Path, version: str, on_start: Callable[[str], None] | None = None
) -> dict[str, StageResult]:
    """Run (or reuse) each stage; a stage after a failed one still runs when its inputs allow (it decides)."""
    root = out / "stages"
    root.mkdir(parents=True, exist_ok=True)
    results: dict[str, StageResult] = {}
    keys: dict[str, str] = {}
    for stage in stages:
        if on_start:
            on_start(stage.name)
        key = stage_key(stage, [keys[name] for name in stage.after], version)
        keys[stage.name] = key
        final = root / stage.name
        marker = final / STAGE_FILE
        if marker.is_file():
            recorded = json.loads(marker.read_text())
            if recorded.get("key") == key:
                results[stage.name] = StageResult(recorded["status"], recorded["summary"], recorded["outputs"], True)
                continue
        partial = root / f".{stage.name}.partial"
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir()
        start = time.perf_counter()
        result = stage.run(partial)
        result.seconds = time.perf_counter() - start
        record = {"key": key, "status": result.status, "summary": result.summary, "outputs": result.outputs}
        (partial / STAGE_FILE).write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
        swap_in(partial, final)
        _log(out, stage.name, result)
        results[stage.name] = result
    return results


def _log(out: Path, name: str, result: StageResult) -> None:
    logs = out / "logs"
    logs.mkdir(exist_ok=True)
    write_atomic(logs / f"{name}.json", json.dumps({"seconds": round(result.seconds, 3)}) + "\n")


def file_digest(path: Path, whole_below: int = 64 << 20) -> str:
    """Content hash of small files; for large ones (a 16 GB shard) the header bytes, size and mtime."""
    h = hashlib.sha256()
    stat = path.stat()
    with open(path, "rb") as f:
        if stat.st_size <= whole_below:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        else:
            h.update(f.read(1 << 20))
            h.update(f"{stat.st_size}:{stat.st_mtime_ns}".encode())
    return h.hexdigest()


def folder_digest(folder: Path) -> str:
    h = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        h.update(str(path.relative_to(folder)).encode())
        h.update(file_digest(path).encode())
    return h.hexdigest()
