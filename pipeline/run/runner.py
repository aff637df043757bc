"""Run stages in order, each keyed by the hash of its inputs, each written atomically, so a rerun with nothing
changed only reads markers and a run killed at any moment (kill -9) resumes where it stopped.

OUT/stages/<name>/ holds a stage's files and, written last, stage.json {key, status, summary, outputs}. A stage is
built in OUT/stages/.<name>.partial and renamed into place; a leftover .partial is discarded. Stage files carry no
wall-clock times (timings go to OUT/logs/), so outputs are byte-identical to an uninterrupted run's.

A stage's key covers its inputs (file digests, options, whether a secret is set, never the secret), the digest of
the dayone code and templates it runs (dayone.run.code) and the keys of the stages it reads. Only a passed stage is
reused: a failed one runs again on the next run, whatever its key. A stage that raises (bad input included) is
recorded as failed with its message, and the run goes on: a stage that reads its outputs is "not run" (it says
which stage it waited for), every other stage still runs.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from dayone.core.atomic import swap_in, write_atomic
from dayone.core.errors import InputError
from dayone.core.redact import redact, redact_data
from dayone.core.vocabulary import FAIL, NOT_RUN, PARTIAL, PASS
from dayone.run.state import read_state

STAGE_FILE = "stage.json"
# A partial stage (dayone.core.vocabulary) is reused, its dependants run, and it does not fail the run, yet it is
# never reported as pass.
DONE = (PASS, PARTIAL)


@dataclass
class StageResult:
    status: str  # PASS | PARTIAL | FAIL | NOT_RUN
    summary: str
    outputs: dict = field(default_factory=dict)  # small, deterministic facts later stages and report.json use
    cached: bool = False
    seconds: float = 0.0
    skipped: bool = False  # not run because the user asked (--skip), not because of something else


@dataclass(frozen=True)
class Stage:
    """name; inputs(): JSON-able facts that decide the outputs (file digests, options); run(workdir) -> result;
    after: the stages whose outputs it reads (their keys are part of its key, so it reruns when they change, and
    it runs only when they passed); code: what it runs, as modules and package folders (see dayone.run.code)."""

    name: str
    inputs: Callable[[], dict]
    run: Callable[[Path], StageResult]
    after: tuple[str, ...] = ()
    code: tuple[str, ...] = ()


def stage_key(stage: Stage, upstream: list[str], version: str) -> str:
    from dayone.run.code import code_digest

    material = {
        "stage": stage.name,
        "dayone": version,
        # The module that defines the stage, then the code it runs.
        "definition": code_digest((stage.run.__module__,), follow=False),
        "code": code_digest(stage.code),
        "inputs": stage.inputs(),
        "upstream": upstream,
    }
    return hashlib.sha256(json.dumps(material, sort_keys=True, default=str).encode()).hexdigest()


def run_stages(
    stages: list[Stage],
    out: Path,
    version: str,
    on_start: Callable[[str], None] | None = None,
    done: dict[str, StageResult] | None = None,
    skip: frozenset[str] = frozenset(),
) -> dict[str, StageResult]:
    """Run (or reuse) each stage in order; `done` holds results of stages run before (their keys are on disk);
    the stages named in `skip` are not run (nor are those that read them)."""
    root = out / "stages"
    root.mkdir(parents=True, exist_ok=True)
    results: dict[str, StageResult] = {}
    earlier = dict(done or {})
    for stage in stages:
        if on_start:
            on_start(stage.name)
        known = {**earlier, **results}
        unknown = [name for name in stage.after if name not in known]
        if unknown:
            raise ValueError(f"stage {stage.name} runs after {unknown}, which are not in this run")
        if stage.name in skip:
            results[stage.name] = StageResult(NOT_RUN, f"skipped on request (--skip {stage.name})", skipped=True)
            continue
        waiting = [name for name in stage.after if known[name].status not in DONE]
        if waiting:
            results[stage.name] = StageResult(NOT_RUN, f"needs {', '.join(waiting)}, which did not pass")
            continue
        results[stage.name] = _run_one(stage, root, out, version)
    return results


def _run_one(stage: Stage, root: Path, out: Path, version: str) -> StageResult:
    upstream = [_recorded(root / name).get("key", "") for name in stage.after]
    try:
        key = stage_key(stage, upstream, version)
    except InputError as err:
        return StageResult(FAIL, str(err))
    final = root / stage.name
    recorded = _recorded(final)
    if recorded.get("key") == key and recorded.get("status") in DONE:
        return StageResult(recorded["status"], recorded["summary"], recorded["outputs"], True)
    partial = root / f".{stage.name}.partial"
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir()
    start = time.perf_counter()
    try:
        result = stage.run(partial)
    except InputError as err:
        result = StageResult(FAIL, str(err))
    except Exception as err:  # noqa: BLE001 (a bug in a stage: recorded with its traceback; the run goes on)
        _write_log(out, f"{stage.name}.traceback", traceback.format_exc())
        result = StageResult(FAIL, f"{type(err).__name__}: {err} (traceback in logs/{stage.name}.traceback)")
    result.seconds = time.perf_counter() - start
    # What a stage says goes to the terminal, stage.json, report.json and the site: no secret in any of them (an
    # exception's text may quote a token, escaped or not).
    result.summary, result.outputs = redact(result.summary), redact_data(result.outputs)
    record = {"key": key, "status": result.status, "summary": result.summary, "outputs": result.outputs}
    write_atomic(partial / STAGE_FILE, json.dumps(record, indent=1, sort_keys=True) + "\n")
    swap_in(partial, final)
    _write_log(out, f"{stage.name}.json", json.dumps({"seconds": round(result.seconds, 3)}) + "\n")
    return result


def _recorded(folder: Path) -> dict:
    """The stage's record, or {} (the stage runs again) when there is none or it cannot be used: corrupt, a link,
    fields of the wrong type."""
    record, _ = read_state(folder / STAGE_FILE)
    if record is None or not isinstance(record.get("summary"), str) or not isinstance(record.get("outputs"), dict):
        return {}
    return record


def _write_log(out: Path, name: str, text: str) -> None:
    write_atomic(out / "logs" / name, text)


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
