"""Run stages in order, each keyed by the hash of its inputs, each written atomically, so a rerun with nothing
changed only reads markers and a run killed at any moment (kill -9) resumes where it stopped.

OUT/stages/<name>/ holds a stage's files and, written last, stage.json {key, status, summary, output}. A stage is
built in OUT/stages/.<name>.partial and renamed into place; a leftover .partial is discarded. Stage files carry no
wall-clock times (timings go to OUT/logs/), so outputs are byte-identical to an uninterrupted run's.

A stage hands the stages after it one typed value (dayone.run.outputs), in memory: stage(workdir, upstream) gets the
values of the stages it runs after, by name. stage.json records that value, so a reused stage hands on the same.

A stage's key covers its inputs (file digests, options, whether a secret is set, never the secret), the digest of
the dayone code and templates it runs (dayone.run.code), and the key and value of each stage it reads. Only a passed
stage is reused: a failed one runs again on the next run, whatever its key. A stage that raises (bad input included)
is recorded as failed with its message, and the run goes on: a stage that reads its outputs is "not run" (it says
which stage it waited for), every other stage still runs.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from dayone.core.atomic import swap_in, write_atomic
from dayone.core.errors import InputError
from dayone.core.redact import redact, redact_data
from dayone.core.vocabulary import FAIL, NOT_RUN, PARTIAL, PASS
from dayone.run.outputs import StageOutput, UnusableOutput
from dayone.run.state import read_state

STAGE_FILE = "stage.json"
# A partial stage (dayone.core.vocabulary) is reused, its dependants run, and it does not fail the run, yet it is
# never reported as pass.
DONE = (PASS, PARTIAL)


@dataclass
class StageResult:
    status: str  # PASS | PARTIAL | FAIL | NOT_RUN
    summary: str
    output: StageOutput | None = None  # what the stages after it read (None: it failed before making one)
    cached: bool = False
    seconds: float = 0.0
    skipped: bool = False  # not run because the user asked (--skip), not because of something else
    key: str = ""  # the stage's key, when it ran or was reused


@dataclass(frozen=True)
class Stage:
    """name; inputs(): JSON-able facts that decide the outputs (file digests, options); run(workdir, upstream) ->
    result, upstream holding the output of each stage in `after` and `reads` by name; after: the stages it needs
    (it runs only when they passed); reads: stages whose output it uses when they made one (None otherwise: skipped,
    or failed before making one); the key and output of both are part of its key, so it reruns when they change;
    output: the type of its result's output; code: the package folders it runs that no import shows (templates,
    scripts a peer runs, modules imported by name): the modules it runs are read off `run` (stage_code)."""

    name: str
    inputs: Callable[[], dict]
    run: Callable[[Path, dict[str, StageOutput | None]], StageResult]
    after: tuple[str, ...] = ()
    code: tuple[str, ...] = ()
    output: type[StageOutput] | None = None  # None: it hands nothing on
    reads: tuple[str, ...] = ()


def stage_code(stage: Stage) -> tuple[str, ...]:
    """What a stage runs, for dayone.run.code: the modules its function imports or names, and its declared folders.
    Not this module: the frame every stage runs in (a record it can no longer read is not reused), and its own
    imports would make every stage key on every stage's code."""
    from dayone.run.code import function_modules

    return (*(m for m in function_modules(stage.run) if m != __name__), *stage.code)


def stage_key(stage: Stage, upstream: dict, version: str) -> str:
    from dayone.run.code import code_digest

    material = {
        "stage": stage.name,
        "dayone": version,
        # The module that defines the stage, then the code it runs.
        "definition": code_digest((stage.run.__module__,), follow=False),
        "code": code_digest(stage_code(stage)),
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
        upstream = {name: known.get(name) for name in (*stage.after, *stage.reads)}
        results[stage.name] = _run_one(stage, root, out, version, upstream)
    return results


def _run_one(stage: Stage, root: Path, out: Path, version: str, read: dict[str, StageResult | None]) -> StageResult:
    upstream = {name: r.output if r is not None else None for name, r in read.items()}
    # Each stage it reads by its key and what it handed on (None: it made nothing): a change in either reruns this one.
    material = {
        name: None if given is None else [read[name].key, given.record(root / name)] for name, given in upstream.items()
    }
    try:
        key = stage_key(stage, material, version)
    except InputError as err:
        return StageResult(FAIL, str(err))
    final = root / stage.name
    recorded = _recorded(final)
    if recorded.get("key") == key and recorded.get("status") in DONE:
        try:
            output = None if stage.output is None else stage.output.load(recorded.get("output"), final)
        except UnusableOutput:
            pass  # built again below
        else:
            return StageResult(recorded["status"], recorded["summary"], output, cached=True, key=key)
    partial = root / f".{stage.name}.partial"
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir()
    start = time.perf_counter()
    try:
        result = stage.run(partial, upstream)
        # What a stage says goes to the terminal, stage.json, report.json and the site: no secret in any of them.
        record = None if result.output is None else redact_data(result.output.record(partial))
        if record is not None:  # an output naming a file the stage did not make is a bug of the stage
            type(result.output).load(record, partial)
    except InputError as err:
        result, record = StageResult(FAIL, str(err)), None
    except Exception as err:  # noqa: BLE001 (a bug in a stage: recorded with its traceback; the run goes on)
        _write_log(out, f"{stage.name}.traceback", traceback.format_exc())
        result = StageResult(FAIL, f"{type(err).__name__}: {err} (traceback in logs/{stage.name}.traceback)")
        record = None
    result.seconds, result.key = time.perf_counter() - start, key
    result.summary = redact(result.summary)  # an exception's text may quote a token, escaped or not
    state = {"key": key, "status": result.status, "summary": result.summary, "output": record}
    write_atomic(partial / STAGE_FILE, json.dumps(state, indent=1, sort_keys=True) + "\n")
    swap_in(partial, final)
    # The later stages get the output as stage.json records it, under the stage's final folder: the same value a
    # reused stage hands on.
    result.output = None if record is None else type(result.output).load(record, final)
    _write_log(out, f"{stage.name}.json", json.dumps({"seconds": round(result.seconds, 3)}) + "\n")
    return result


def _recorded(folder: Path) -> dict:
    """The stage's record, or {} (the stage runs again) when there is none or it cannot be used: corrupt, a link,
    fields of the wrong type (the output is checked by the stage's output type, when it is read)."""
    record, _ = read_state(folder / STAGE_FILE)
    if record is None or not isinstance(record.get("summary"), str) or not isinstance(record.get("key"), str):
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
