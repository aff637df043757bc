"""Run a target's probe in its framework's peer environment, per world size, and judge what it loaded.

    report = conform_target("vllm", adapter_folder, checkpoint, spec, world_sizes=(1, 2))
The report is a TargetReport (dayone.conform.results; conform.json's content once written): its runs are the probe's
levels.json per world size, read and validated here, with "loaded" filled by the judge. A level that could not run
is "not run" with its reason, never "pass". As it goes it reports each step (dayone.present.step: a timestamped line
off a terminal): the install, each world size's probe and forward as they start, each level as it is judged.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path

from dayone.adapters.pins import RELEASES
from dayone.adapters.weightmap import TARGET_LAYOUT, WeightMap, build_weight_map, walk
from dayone.checkpoint.reader import open_local
from dayone.conform import judge, peers
from dayone.conform.forward import References, engine_prompts, judge_forward
from dayone.conform.results import LEVELS, Level, MalformedProbeOutput, Run, TargetReport, read_run
from dayone.core import child
from dayone.core.vocabulary import ENGINES
from dayone.present import step
from dayone.spec.schema import ModelSpec

# Targets judged by an inference engine's own release (Miles and Megatron-Bridge are judged by megatron-core).
PROBE_TIMEOUT_S = 900
FORWARD_DTYPES = ("float32", "bfloat16")
NO_LAYOUT = "the checkpoint's weights have no layout at world size"
# Engines whose probes can spread the routed experts by expert parallelism (each rank holds whole experts), taken at
# a world size over which the experts do not split by tensor parallelism: vLLM's --enable-expert-parallel, SGLang's
# --ep-size.
EXPERT_PARALLEL = {"vllm", "sglang"}
PROBED = LEVELS[: LEVELS.index("loaded") + 1]  # what one probe process reaches: discovered ... loaded


def _level(status: str, detail: str) -> Level:
    return Level(status=status, detail=detail)


def _not_run(target: str, world: int, reason: str) -> Run:
    levels = {level: _level("not run", reason) for level in LEVELS}
    return Run(framework=target, version=RELEASES[target].version, world_size=world, facts={}, levels=levels)


def not_run_report(target: str, world_sizes, reason: str) -> TargetReport:
    runs = [_not_run(target, n, reason) for n in world_sizes]
    return TargetReport(target=target, framework=target, version=RELEASES[target].version, runs=runs)


@dataclass(frozen=True)
class Case:
    """One adapter to conform (conform_target's arguments): adapter, the target's generated folder (its
    pyproject.toml); keep, where to leave the probes' dumps; forward_dtypes, the engine's forward runs in each at world
    size 1, in the first at larger world sizes; references, the reference tier's runs on this checkpoint, shared with
    other targets (each engine's fp32 forward finishes the same sequences, and a reference run of the README's 93
    layers takes seconds)."""

    adapter: Path
    checkpoint: Path
    spec: ModelSpec
    world_sizes: tuple[int, ...] = (1, 2)
    keep: Path | None = None
    forward_dtypes: tuple[str, ...] = FORWARD_DTYPES
    references: References | None = None


def conform_target(
    target: str,
    adapter: Path,
    checkpoint: Path,
    spec: ModelSpec,
    world_sizes=(1, 2),
    keep: Path | None = None,
    forward_dtypes: tuple[str, ...] = FORWARD_DTYPES,
    references: References | None = None,
) -> TargetReport:
    """The TargetReport of one adapter (Case says what each argument is)."""
    case = Case(adapter, checkpoint, spec, tuple(world_sizes), keep, tuple(forward_dtypes), references)
    return conform_targets(target, [case])[0]


def conform_targets(target: str, cases: list[Case]) -> list[TargetReport]:
    """One TargetReport per case, in order. Where the framework has a session program, one process runs every case's
    jobs at every world size: the probes, then the forwards, before "loaded" is judged (a forward after a load judged
    wrong is discarded below). One framework import for them all, not one a world size or an adapter (about 9 s of
    one core each, for vLLM and SGLang alike); each job runs in a process of its own forked from the session, so
    adapters of one package name (a planted copy beside the original) do not meet."""
    python = peers.peer_python(target)
    if python is None:
        step(f"conform: {target}: not run: {peers.missing(target)}")
        return [not_run_report(target, case.world_sizes, peers.missing(target)) for case in cases]
    with tempfile.TemporaryDirectory(prefix=f"dayone-conform-{target}-") as tmp:
        scratch = Path(tmp)
        # The probes run in other folders, and the report names the checkpoint by its absolute path, never a
        # relative one (a folder called "ck" would be scrubbed out of every word holding those letters).
        cases = [replace(case, checkpoint=Path(case.checkpoint).resolve()) for case in cases]
        roots = [scratch if len(cases) == 1 else scratch / f"case-{i}" for i in range(len(cases))]
        prepared = [_prepare(target, python, case, root) for case, root in zip(cases, roots, strict=True)]
        ran = None  # a session's (last error line, wall time): every case's jobs, run in one process
        if peers.session_script(target) is not None:
            for case, entry in zip(cases, prepared, strict=True):
                if not isinstance(entry, str):
                    _say_planned(target, case, entry[1], len(cases))
            jobs = [job for entry in prepared if not isinstance(entry, str) for plan in entry[1]
                    for job in (plan.probe, *plan.forwards)]  # fmt: skip
            if jobs:
                start = time.monotonic()
                tail = _execute(python, target, jobs, scratch)[0]
                ran = tail, round(time.monotonic() - start, 1)
        reports = []
        for case, root, entry in zip(cases, roots, prepared, strict=True):
            if isinstance(entry, str):
                reports.append(_not_installed(target, case, entry))
                continue
            table, plans = entry
            report = _judged(target, case, table, plans, python, ran)
            reports.append(_without_local_paths(report, {
                str(peers.peers_root()): "<peers>", str(case.checkpoint): "<checkpoint>", tmp: "<scratch>",
                str(Path(case.keep or root).resolve()): "<out>",
            }))  # fmt: skip
    return reports


def _prepare(target: str, python: Path, case: Case, root: Path) -> tuple[WeightMap, list[_Plan]] | str:
    """The adapter installed in a site of its own under root: its weight map and each world size's jobs; or why it
    did not install."""
    root.mkdir(parents=True, exist_ok=True)
    step(f"conform: {target}: installing the adapter in its peer environment")
    try:
        peers.install_adapter(case.adapter, python, root / "site", root)
    except RuntimeError as err:
        step(f"conform: {target}: the adapter was not installed: {err}")
        return str(err)
    table = build_weight_map(case.spec, TARGET_LAYOUT[target], mxfp4="packed")
    return table, [_plan(target, root / "site", case.checkpoint, case.spec, table, world, case.keep or root,
                         case.forward_dtypes) for world in case.world_sizes]  # fmt: skip


def _not_installed(target: str, case: Case, reason: str) -> TargetReport:
    failed = not_run_report(target, case.world_sizes, "the adapter was not installed")
    for run in failed.runs:
        run.levels["discovered"] = _level("fail", reason)
    return failed


def _say_planned(target: str, case: Case, plans: list[_Plan], cases: int) -> None:
    """Every world size's "probing" line, before the session starts."""
    sizes = f"world size{'s' if len(plans) > 1 else ''} {', '.join(str(plan.world) for plan in plans)}"
    every = sizes if cases == 1 else f"{sizes} and {cases - 1} other adapter{'s' if cases > 2 else ''}"
    for plan in plans:
        also = f", then the forward in {', '.join(plan.dtypes)}" if plan.forwards else ""
        step(f"conform: {target} world size {plan.world}: probing {', '.join(PROBED)}{plan.how}{also}, in one "
             f"{target} process for {every}")  # fmt: skip


def _judged(target: str, case: Case, table: WeightMap, plans: list[_Plan], python: Path,
            ran: tuple[str, float] | None) -> TargetReport:  # fmt: skip
    """The case's report from what its jobs wrote: `ran`, the session's (last error line, wall time) when one ran
    them all; None, each world size's probe and forwards run here. Each world size's levels, "loaded" by the judge,
    the forward against the reference tier."""
    report = TargetReport(target=target, framework=target, version=RELEASES[target].version, runs=[])
    references = case.references
    for plan in plans:
        world, out, forwards = plan.world, plan.out, plan.forwards
        if ran is not None:
            tail, seconds = ran
        else:
            step(f"conform: {target} world size {world}: probing {', '.join(PROBED)}{plan.how}")
            start = time.monotonic()
            (tail,) = _execute(python, target, [plan.probe], out)
            seconds = round(time.monotonic() - start, 1)
        run = _probe_run(target, world, out, tail, seconds)
        # The probe fails "loaded" itself when the framework's load raised (the error names the tensor).
        if run.levels["built"].status == "pass" and run.levels["loaded"].status != "fail":
            run.levels["loaded"] = _judge(table, case.checkpoint, world, out, run, plan.parallel)
        for level in PROBED:
            _said(target, world, level, run.levels[level])
        if run.levels["built"].status == "pass" and forwards:
            loaded = run.levels["loaded"]
            if loaded.status == "fail":
                run.levels["forward"] = _level("not run", "an earlier level failed")
            elif loaded.status == "not run" and loaded.detail.startswith(NO_LAYOUT):
                # the engine loads such a checkpoint wrongly rather than refusing it (vLLM's MXFP4 experts:
                # a scale group split over ranks loads as zeros): nothing an engine computed from it is judged
                run.levels["forward"] = _level("not run", loaded.detail)
            else:
                references = references or References(open_local(case.checkpoint), case.spec)
                if ran is not None:
                    forward_tails = [tail] * len(forwards)
                else:
                    step(f"conform: {target} world size {world}: forward in {', '.join(plan.dtypes)}")
                    forward_tails = _execute(python, target, forwards, out)
                run.levels["forward"] = _forward(target, references, forwards, forward_tails)
        _said(target, world, "forward", run.levels["forward"])
        report.runs.append(run)
    return report


@dataclass(frozen=True)
class _Plan:
    """One world size's jobs: the probe, and the forward in each dtype (none where the framework has no forward)."""

    world: int
    out: Path
    parallel: bool  # the routed experts spread by expert parallelism
    how: str  # what the progress line says of it
    dtypes: tuple[str, ...]
    probe: dict
    forwards: list[dict]


def _plan(target, site, checkpoint, spec, table, world, root, forward_dtypes) -> _Plan:
    out = root / f"{target}-ws{world}"
    out.mkdir(parents=True, exist_ok=True)
    unsplit = walk.experts_split_problem(table, world) if world > 1 else None
    parallel = bool(unsplit) and target in EXPERT_PARALLEL
    how = f" with the experts spread by expert parallelism ({unsplit})" if parallel else ""
    dtypes = tuple(forward_dtypes if world == 1 else forward_dtypes[:1])
    forwards = []
    if peers.forward_script(target) is not None:
        (out / "prompts.json").write_text(json.dumps(engine_prompts(spec.vocab_size)))
        forwards = [_job("forward", site, checkpoint, world, out / f"forward-{dtype}", parallel, dtype=dtype,
                         prompts=str(out / "prompts.json")) for dtype in dtypes]  # fmt: skip
    probe = _job("probe", site, checkpoint, world, out, parallel)
    for job in (probe, *forwards):
        job["run"] = str(out)  # a session runs a run's forwards only if its probe failed no level
    return _Plan(world, out, parallel, how, dtypes, probe, forwards)


def _said(target: str, world: int, name: str, level: Level) -> None:
    """One progress step per level as it is judged: its status, and why where it did not pass."""
    why = "" if level.status == "pass" else f": {level.detail}"
    step(f"conform: {target} world size {world}: {name} {level.status}{why}")


def _without_local_paths(report: TargetReport, names: dict[str, str]) -> TargetReport:
    """The report with this machine's folders (peer venvs, the checkpoint, scratch) named, not spelled out: reports
    travel (dashboard, release assets) and a local path says nothing there."""

    def scrub(text: str) -> str:
        for path, name in sorted(names.items(), key=lambda item: -len(item[0])):
            if Path(path).is_absolute():  # a relative name ("ck") is also a piece of ordinary words
                text = text.replace(path, name)
        return text

    for run in report.runs:
        run.traceback = scrub(run.traceback) if run.traceback else run.traceback
        run.problems = [scrub(p) for p in run.problems] if run.problems else run.problems
        for level in run.levels.values():
            level.detail = scrub(level.detail)
    return report


def _job(kind: str, site: Path, checkpoint: Path, world: int, out: Path, expert_parallel: bool, **forward) -> dict:
    """A probe or forward job: its own script's arguments (`argv`), and what the driver reads back (a session program
    takes a list of them, JOBS.json). `forward`: the forward's dtype and prompts file."""
    argv = ["--package-site", str(site), "--checkpoint", str(checkpoint), "--world-size", str(world), "--out", str(out)]
    argv += [arg for key, value in forward.items() for arg in (f"--{key}", str(value))]
    argv += ["--expert-parallel"] if expert_parallel else []
    return {"kind": kind, "world_size": world, "out": str(out), "argv": argv, **forward}


def _command(python: Path, target: str, job: dict) -> list[str]:
    """The command line of one job's own program (the probe or the forward script)."""
    script = peers.probe_script(target) if job["kind"] == "probe" else peers.forward_script(target)
    return [str(python), str(script), *job["argv"]]


def _execute(python: Path, target: str, jobs: list[dict], out: Path) -> list[str]:
    """Run the jobs (several: in one session process); each job's last line of error output, for a job that wrote
    nothing."""
    for job in jobs:
        Path(job["out"]).mkdir(parents=True, exist_ok=True)
    session = peers.session_script(target)
    if session is not None and len(jobs) > 1:
        (out / "jobs.json").write_text(json.dumps(jobs, indent=1))
        tail = _tail([str(python), str(session), "--jobs", str(out / "jobs.json")], PROBE_TIMEOUT_S * len(jobs))
        return [tail] * len(jobs)
    return [_tail(_command(python, target, job), PROBE_TIMEOUT_S) for job in jobs]


def _tail(cmd: list[str], timeout: int) -> str:
    try:
        proc = child.run(cmd, capture_output=True, text=True, timeout=timeout)
        return (proc.stderr.strip().splitlines() or ["no output"])[-1]
    except subprocess.TimeoutExpired:
        return f"the {Path(cmd[1]).stem} program ran past {timeout} s"


def _probe_run(target: str, world: int, out: Path, tail: str, seconds: float) -> Run:
    """The probe's levels.json, read and validated, with the wall time it took (with the forwards, in a session), or
    a run failed at "discovered" saying why there is none."""
    levels = out / "levels.json"
    if not levels.is_file():
        return _probe_failed(target, world, f"the {target} probe wrote no levels.json: {tail}")
    try:
        run = read_run(levels)
    except MalformedProbeOutput as err:
        return _probe_failed(target, world, f"the {target} probe wrote a malformed {err}")
    run.seconds = seconds
    return run


def _forward(target: str, references: References, jobs: list[dict], tails: list[str]) -> Level:
    """The engine's own generation (its forward jobs, one per dtype) judged against the reference tier (fp32: the
    fp32 rows; bf16: against the noise floor)."""
    levels = []
    for job, tail in zip(jobs, tails, strict=True):
        dtype, where = job["dtype"], Path(job["out"])
        result_file = where / "forward.json"
        if not result_file.is_file():
            return _level("fail", f"{dtype}: the {target} forward probe wrote no forward.json: {tail}")
        level = judge_forward(json.loads(result_file.read_text()), references, dtype, where / "layers.safetensors")
        levels.append((dtype, level))
    return _combined(levels)


def _combined(levels: list[tuple[str, Level]]) -> Level:
    """One level from a run per dtype: passed only if each passed; its figures keyed by dtype."""
    failed = [(d, lv) for d, lv in levels if lv.status != "pass"]
    status = failed[0][1].status if failed else "pass"
    detail = " | ".join(f"{d}: {lv.detail}" for d, lv in (failed or levels))
    figures = {f"{d}.{k}": v for d, lv in levels for k, v in (lv.figures or {}).items()}
    return Level(status=status, detail=detail, figures=figures or None)


def _probe_failed(target: str, world: int, reason: str) -> Run:
    run = _not_run(target, world, "the probe did not finish")
    run.levels["discovered"] = _level("fail", reason)
    return run


def _judge(table, checkpoint: Path, world: int, dump: Path, run: Run, expert_parallel: bool) -> Level:
    tensors = _Tensors(open_local(Path(checkpoint)))
    problems: list[str] = []
    for rank in range(world):
        try:
            problems += judge.judge_rank(table, tensors, rank, world, dump, expert_parallel)
        except ValueError as err:  # the map cannot shard a tensor over this world size (walk.split)
            return _level("not run", f"{NO_LAYOUT} {world}: {err}")
        except RuntimeError as err:  # a checkpoint tensor that does not fit its parameter as the spec sizes it
            return _level("fail", f"the checkpoint does not fit the spec's weight map: {err}")
    if problems:
        run.problems = problems[: judge.LIMIT]
        return _level("fail", judge.first(problems))
    spread = ", experts spread by expert parallelism" if expert_parallel else ""
    return _level(
        "pass",
        f"every parameter of {world} rank(s){spread} bitwise equal to the reference reading, each weight loader "
        f"called once per tensor, every checkpoint tensor consumed, derived tensors right after a weight update",
    )


class _Tensors:
    """Checkpoint tensors by name, read when asked (dayone's own reader; nothing unpickled)."""

    def __init__(self, checkpoint) -> None:
        self.checkpoint = checkpoint
        self._cache: dict = {}

    def keys(self):
        return self.checkpoint.names()

    def __getitem__(self, name: str):
        if name not in self._cache:
            self._cache[name] = self.checkpoint.read(name)
        return self._cache[name]


def conform_all(
    adapters: Path, checkpoint: Path, spec: ModelSpec, world_sizes=(1, 2), targets=None
) -> list[TargetReport]:
    """Every engine target generated under `adapters` (generate's output folder: adapters/<target>/)."""
    chosen = [t for t in (targets or ENGINES) if (adapters / t / "pyproject.toml").is_file()]
    return [conform_target(t, adapters / t, checkpoint, spec, world_sizes) for t in chosen]


def cell_details(report: TargetReport) -> dict:
    """A dashboard cell's details for one target: levels in order, each passed only where it passed at every world
    size, its reason naming the world size where it did not; the full runs beside them."""
    levels = []
    for level in LEVELS:
        entries = [(run.world_size, run.levels[level]) for run in report.runs]
        failed = [(n, e) for n, e in entries if e.status == "fail"]
        missing = failed or [(n, e) for n, e in entries if e.status != "pass"]
        if missing:
            n, entry = missing[0]
            levels.append({"level": level, "status": entry.status, "reason": f"world size {n}: {entry.detail}"})
        else:
            sizes = ", ".join(str(n) for n, _ in entries)
            levels.append({"level": level, "status": "pass", "reason": f"world size {sizes}"})
    summary = ", ".join(f"ws{run.world_size} {run.reached()[0] or 'none'}" for run in report.runs)
    status = "pass" if levels[0]["status"] == "pass" else levels[0]["status"]
    return {"status": status, "summary": summary, "levels": levels, "version": report.version,
            "runs": [run.as_dict() for run in report.runs]}  # fmt: skip
