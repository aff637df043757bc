"""`integrate run CHECKPOINT -o OUT`: every stage against one checkpoint, resumable; `--demo` needs no weights."""

from __future__ import annotations

import json
import os
import shutil
from datetime import UTC, datetime
from pathlib import Path

import click
from dayone.core.atomic import write_atomic
from dayone.core.errors import InputError
from dayone.core.vocabulary import ARCHS, ENGINES, TARGETS
from dayone.present import console, emit_json, on_a_terminal, progress_line, set_step_sink, shown
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

DEMO_SCALE = "tiny"  # dayone.run.options.DEMO_SCALE, for --help without importing the run
SCALE_NAMES = ("tiny", "small", "faithful")  # dayone.synth.SCALE_NAMES, without importing torch for --help


@click.command("run")
@click.argument("checkpoint", required=False)
@click.option("--demo", is_flag=True, help="Synthesise a small stand-in checkpoint (of --spec NAME or FILE, default "
              "kimi-k3) and run every stage offline; compile and plan at the spec's own widths.")  # fmt: skip
@click.option("--spec", "spec_arg", help="Spec NAME or FILE (default: derived from the checkpoint's config.json).")
@click.option("--scale", type=click.Choice(SCALE_NAMES), default=DEMO_SCALE, show_default=True,
              help="--demo's stand-in: faithful keeps every per-head and per-expert width (fewer layers and experts); "
              "tiny and small shrink widths too.")  # fmt: skip
@click.option("--stand-in-for", "stand_in_for", metavar="SPEC", help="CHECKPOINT is a small stand-in of SPEC (NAME "
              "or FILE, e.g. written by `synth SPEC --scale faithful`): compile and plan at SPEC's widths.")  # fmt: skip
@click.option("--target", "targets", multiple=True, type=click.Choice(TARGETS), help="Targets (default: all).")
@click.option("--arch", "archs", multiple=True, type=click.Choice(ARCHS), help="Default: both.")
@click.option("--gpu", default="h200", show_default=True, help="GPU for the serving plan (h100, h200, b200, gb300).")
@click.option("--gpus", type=click.IntRange(1), help="GPU count for the plan; the plan stage fails when the model "
              "does not fit them [default: the smallest count of --gpu that fits].")  # fmt: skip
@click.option("--publish", "publish_repo", metavar="OWNER/NAME", help="Publish a GitHub release (GITHUB_TOKEN).")
@click.option("--tag", help="Release tag for --publish.")
@click.option("--api-url", help="GitHub Enterprise (or test server) API root for --publish.")
@click.option(
    "--skip",
    "skip",
    multiple=True,
    metavar="STAGE",
    help="Do not run STAGE (repeatable): reported as not run, with the reason; the exit code ignores it.",
)
@click.option("-o", "--out", "out", required=True, type=click.Path(file_okay=False, path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print OUT/report.json instead of the summary table.")
def run(checkpoint, demo, spec_arg, scale, stand_in_for, targets, archs, gpu, gpus, publish_repo, tag, api_url, skip, out,
        as_json) -> None:  # fmt: skip
    """Resolve, inspect, plan, generate, compile, validate, package (and publish) CHECKPOINT; write OUT/report.json
    and the dashboard OUT/site. Stages are keyed by their inputs' hashes and the code they run: a rerun with nothing
    changed reuses them, a failed stage is retried, and a killed run resumes. A failed stage does not stop the run:
    the stages that need it are reported "not run", the others run. One run at a time per OUT (a second exits 2).
    A stage that did all this machine can but left work not run (conform's forward on a CPU) is "partial": done,
    never "pass". Exit 0 only if every stage passed or is partial (or was skipped on request), 1 otherwise."""
    from dayone.commands.compile_cmd import compiling_process
    from dayone.commands.validate_cmd import transformers_torch_path
    from dayone.core.redact import clean_token
    from dayone.run.lock import hold
    from dayone.run.options import Publish, RunOptions
    from dayone.run.state import clean_leftovers, scratch_tempdir

    if bool(publish_repo) != bool(tag):
        raise InputError("run: --publish and --tag go together")
    options = RunOptions(
        out=out.absolute(),  # stages run tools in other folders; what they report is relative to OUT
        checkpoint=checkpoint, demo=demo, spec=spec_arg, scale=scale, stand_in_for=stand_in_for,
        targets=tuple(targets) or TARGETS, archs=tuple(archs) or ARCHS, gpu=gpu, gpus=gpus,
        publish=Publish(publish_repo, tag, api_url) if publish_repo else None, skip=frozenset(skip),
    )  # fmt: skip
    compiling_process()  # the compile stage builds real kernels
    transformers_torch_path()  # the validate stage's reference, where it is transformers
    out = options.out
    if options.publish:  # up front: a token with a line end made publish fail quoting it, stages later
        clean_token(os.environ.get("GITHUB_TOKEN"), "GITHUB_TOKEN")
    out.mkdir(parents=True, exist_ok=True)
    with hold(out), scratch_tempdir(out):
        clean_leftovers(out)
        report, results = _run(options, as_json)
    if as_json:
        emit_json(report)
    else:
        _summary(results, out)
    raise SystemExit(0 if report["ok"] else 1)


def _run(options, as_json: bool):
    from dayone import __version__
    from dayone.checkpoint import open_checkpoint
    from dayone.checkpoint.spec_source import spec_for_checkpoint
    from dayone.run import stages as S
    from dayone.run.options import DEMO_SEED
    from dayone.run.runner import PASS, run_stages
    from dayone.run.stand_in import check_stand_in
    from dayone.spec.registry import load_spec
    from dayone.synth.scale import stand_in_name

    out, demo, skip = options.out, options.demo, options.skip
    created = _created(out)
    results = {}
    columns = (
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    lines = not on_a_terminal()  # CI, `| tee`, a file: a timestamped line per stage start and end, and per step
    with Progress(*columns, console=console, transient=True, disable=as_json or lines) as progress:
        task = progress.add_task("starting", total=None)  # known once the stage list is
        shown = _Shown(progress, task, lines)

        def run_each(stages: list) -> None:
            """The stages one at a time, so that each one's end is shown as it ends."""
            for stage in stages:
                result = run_stages([stage], out, __version__, shown.started, done=results, skip=skip)[stage.name]
                results[stage.name] = result
                shown.ended(stage.name, result)

        named = load_spec(options.named_spec) if options.named_spec else None
        chosen, checkpoint, spec_arg = options.targets, options.checkpoint, options.spec
        if named is not None:
            refuse_unhonoured(named, chosen)
        if demo:
            run_each([S.synth_stage(named, options.scale, DEMO_SEED)])
            if results["synth"].status != PASS:
                shown.started("dashboard")
                return _finish(out, created, None, results, options.gpu, options.gpus), results
            checkpoint, spec_arg = str(results["synth"].output.checkpoint), None
        ckpt = open_checkpoint(checkpoint, read_headers=False)
        spec = spec_for_checkpoint(ckpt, spec_arg)
        if demo:  # the run made this stand-in: its lineage names it (kimi-k3-tiny), as it named the synth's spec
            spec = spec.model_copy(update={"name": stand_in_name(named.name, options.scale)})
        refuse_unhonoured(spec, chosen)
        ctx = S.RunContext(ckpt, spec, out, created, chosen, options.archs, options.gpu, options.gpus,
                           stands_in_for=check_stand_in(spec, named) if named else None)  # fmt: skip
        stages = [S.spec_stage(ctx), S.coverage_stage(ctx), S.plan_stage(ctx), S.generate_stage(ctx),
                  S.conform_stage(ctx), S.compile_stage(ctx), S.validate_stage(ctx), S.package_stage(ctx)]  # fmt: skip
        if options.publish:
            stages.append(S.publish_stage(ctx, options.publish))
        progress.update(task, total=(1 if demo else 0) + len(stages) + 1)  # synth, the stages, the dashboard
        unknown = sorted(skip - {stage.name for stage in stages})
        if unknown:
            raise InputError(f"--skip {unknown[0]}: no such stage ({', '.join(s.name for s in stages)})")
        run_each(stages)
        shown.started("dashboard")
        report = _finish(out, created, ctx, results, options.gpu, options.gpus)
        shown.ended("dashboard", None)
        return report, results


def refuse_unhonoured(spec, targets) -> None:
    """A spec field a target cannot honour stops the run before any stage runs (one line, exit 2), rather than at
    generate after synth, spec, coverage and plan."""
    from dayone.adapters.targets.refusals import refusals

    for target in targets:
        found = refusals(target, spec)
        if found:
            raise InputError(f"{found[0]} (refused before any stage ran)")


class _Shown:
    """A run's progress: rich's bar on a terminal (a step of a long stage in its description), or off a terminal a
    timestamped line on stderr per stage start, per step, and per stage end with its status, time and summary."""

    def __init__(self, progress: Progress, task, lines: bool):
        self.progress, self.task, self.lines, self.stage = progress, task, lines, ""
        set_step_sink(progress_line if lines else self.step)

    def started(self, name: str) -> None:
        self.stage = name
        if self.lines:
            progress_line(f"{name}: started")
        else:  # the count says which stage of how many is running (it moves on as each one starts)
            self.progress.update(self.task, description=f"stage {shown(name)}")
            self.progress.advance(self.task)

    def step(self, text: str) -> None:
        self.progress.update(self.task, description=f"stage {shown(self.stage)}: {shown(text)}")

    def ended(self, name: str, result) -> None:
        if not self.lines:
            return
        if result is None:
            progress_line(f"{name}: done")
            return
        took = " (cached)" if result.cached else (f" ({result.seconds:.1f} s)" if result.seconds else "")
        progress_line(f"{name}: {result.status}{took}: {result.summary}")


def _created(out: Path) -> datetime:
    """The run's timestamp for every report: SOURCE_DATE_EPOCH when set (reproducible outputs), else the first
    start of this OUT, kept across resumes in OUT/run.json."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    if epoch is not None:
        try:
            return datetime.fromtimestamp(int(epoch), UTC)
        except ValueError:
            raise InputError(f"SOURCE_DATE_EPOCH={epoch!r}: not an integer") from None
    from dayone.run.state import RUN_FILE, read_state

    marker = out / RUN_FILE
    recorded, problem = read_state(marker)  # never through a link; a corrupt one is started again
    if recorded is not None:
        try:
            return datetime.fromisoformat(recorded["created"])
        except (KeyError, TypeError, ValueError):
            problem = "holds no valid 'created' time"
    if problem is not None:
        click.echo(f"warning: {marker}: {problem}; starting this run's record again", err=True)
    created = datetime.now(UTC).replace(microsecond=0)
    write_atomic(marker, json.dumps({"created": created.isoformat()}) + "\n")
    return created


def _finish(out: Path, created: datetime, ctx, results: dict, gpu: str, gpus: int) -> dict:
    """OUT/report.json (deterministic: statuses and messages, no timings, no local paths), then OUT/reports and the
    dashboard in OUT/site from the reports of this run's stages only (a stage folder left by an earlier run with other inputs
    is not this run's result)."""
    from dayone.core.atomic import staged_folder
    from dayone.core.vocabulary import NOT_RUN
    from dayone.dashboard.site import build_site
    from dayone.reports.files import load_reports, write_report
    from dayone.run.runner import DONE

    report = {
        "ok": all(r.status in DONE or r.skipped for r in results.values()),
        "spec": ctx.spec.name if ctx else None,
        "checkpoint": ctx.checkpoint_identity if ctx else None,
        "created": created.isoformat(),
        "stages": [{"stage": name, "status": r.status, "summary": r.summary} for name, r in results.items()],
    }
    write_atomic(out / "report.json", json.dumps(report, indent=1) + "\n")
    # A stage that started this time wrote its own reports, whatever its status (conform without its peers ends
    # "not run" with a report per engine saying which peer is missing); one that never started (skipped, or a stage
    # it needs failed) may hold an earlier run's folder, and gets stand-in reports instead.
    ran = {name: r for name, r in results.items() if r.status != NOT_RUN or r.seconds}
    files = sorted(p for name, r in ran.items() for p in _reports_of(out / "stages" / name, r))
    not_run = _stand_in_reports(ctx, results, files) if ctx is not None else []
    # OUT/reports: this run's reports, flat, for `integrate dashboard` and the release workflow.
    with staged_folder(out / "reports") as folder:
        for path in files:
            shutil.copyfile(path, folder / path.name)
        for r in not_run:
            write_report(folder / f"report-{r.stage}{'-' + r.target if r.target else ''}.json", r)
    build_site(load_reports(files) + not_run, out / "site", pre_release=set(), gpu=gpu, gpus=gpus)
    return report


def _reports_of(folder: Path, result) -> tuple[Path, ...]:
    """The reports a stage that started this time wrote: those its output names, or, for a stage that raised before
    making one (a bug, bad input), whatever it wrote before that, still its evidence."""
    if result.output is not None:
        return result.output.reports
    return tuple(folder.glob("report-*.json"))


def _stand_in_reports(ctx, results: dict, files: list[Path]) -> list:
    """Reports for the dashboard cells of stages that wrote none: "not run" with the reason, or "fail" with the
    message of a stage that stopped before writing them all (bad input, a bug): a target it never reached fails
    with the stage's message, never shows as a pass or as missing. Conformance and the engines' validate cells are
    of the engines only (a training target's numerics are generate --check's)."""
    from dayone.core.vocabulary import FAIL, NOT_RUN, STAGES, TARGETED_STAGES
    from dayone.reports.model import Report

    wrote = {(p.parent.name, _report_target(p)) for p in files}
    out = []
    for name, r in results.items():
        if name not in STAGES or r.status not in (NOT_RUN, FAIL):
            continue
        targets = ctx.targets if name in TARGETED_STAGES else (None,)
        if name in ("conform", "validate"):
            targets = tuple(t for t in targets if t in ENGINES)
        for target in targets:
            if (name, target) in wrote or (r.status == FAIL and target is None and any(s == name for s, _ in wrote)):
                continue
            out.append(Report(stage=name, spec=ctx.spec.name, target=target, status=r.status, created=ctx.created,
                              details={"reason": r.summary}))  # fmt: skip
    return out


def _report_target(path: Path) -> str | None:
    """The target a stage's report file is of (report-STAGE-TARGET.json; compile's suffix is an arch, not one)."""
    suffix = path.stem.removeprefix(f"report-{path.parent.name}").removeprefix("-")
    return suffix if suffix in TARGETS or suffix == "reference" else None


def _summary(results: dict, out: Path) -> None:
    table = Table("stage", "status", "time", "summary")
    colours = {"pass": "green", "partial": "cyan", "fail": "red"}
    for name, r in results.items():
        status = f"[{colours.get(r.status, 'yellow')}]{r.status}[/]"
        time = "cached" if r.cached else (f"{r.seconds:.1f} s" if r.seconds else "-")  # "-": it did not start
        table.add_row(name, status, time, shown(r.summary))
    console.print(table)
    console.print(
        f"report: {shown(_shown(out / 'report.json'))}   dashboard: {shown(_shown(out / 'site' / 'index.html'))}"
    )


def _shown(path: Path) -> str:
    """A path as the user would type it: relative to the working directory when inside it."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


COMMAND = run
