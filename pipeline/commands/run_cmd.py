"""`integrate run CHECKPOINT -o OUT`: every stage against one checkpoint, resumable; `--demo` needs no weights."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path

import click
from dayone.commands.output import console, emit_json, write_atomic
from dayone.errors import InputError
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

TARGETS = ("sglang", "vllm", "miles", "megatron-bridge")
DEMO_SPEC, DEMO_SCALE, DEMO_SEED = "kimi-k3", "tiny", 0


@click.command("run")
@click.argument("checkpoint", required=False)
@click.option("--demo", is_flag=True, help="Synthesise a tiny K3 checkpoint and run every stage offline.")
@click.option("--spec", "spec_arg", help="Spec NAME or FILE (default: derived from the checkpoint's config.json).")
@click.option("--target", "targets", multiple=True, type=click.Choice(TARGETS), help="Targets (default: all).")
@click.option("--arch", "archs", multiple=True, type=click.Choice(["sm_90", "sm_100"]), help="Default: both.")
@click.option("--gpu", default="h200", show_default=True, help="GPU for the serving plan.")
@click.option("--gpus", default=8, show_default=True, type=click.IntRange(1), help="GPU count for the plan.")
@click.option("--publish", "publish_repo", metavar="OWNER/NAME", help="Publish a GitHub release (GITHUB_TOKEN).")
@click.option("--tag", help="Release tag for --publish.")
@click.option("--api-url", help="GitHub Enterprise (or test server) API root for --publish.")
@click.option("-o", "--out", "out", required=True, type=click.Path(file_okay=False, path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print OUT/report.json instead of the summary table.")
def run(checkpoint, demo, spec_arg, targets, archs, gpu, gpus, publish_repo, tag, api_url, out, as_json) -> None:
    """Resolve, inspect, plan, generate, compile, validate, package (and publish) CHECKPOINT; write OUT/report.json
    and the dashboard OUT/site. Stages are keyed by their inputs' hashes: a rerun with nothing changed reuses them,
    and a killed run resumes. Exit 0 only if every stage passed."""
    from dayone import __version__
    from dayone.checkpoint import open_checkpoint
    from dayone.commands.spec_source import spec_for_checkpoint
    from dayone.run import stages as S
    from dayone.run.runner import run_stages

    if demo == bool(checkpoint):
        raise InputError("run: give a CHECKPOINT or --demo (not both)")
    if bool(publish_repo) != bool(tag):
        raise InputError("run: --publish and --tag go together")
    out.mkdir(parents=True, exist_ok=True)
    created = _created(out)
    results = {}
    columns = (
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=console, transient=True, disable=as_json) as progress:
        task = progress.add_task("starting", total=(1 if demo else 0) + 7 + (1 if publish_repo else 0))

        def started(name: str) -> None:
            # The count says which stage of how many is running (it moves on as each one starts).
            progress.update(task, description=f"stage {name}")
            progress.advance(task)

        if demo:
            results.update(run_stages([S.synth_stage(DEMO_SPEC, DEMO_SCALE, DEMO_SEED)], out, __version__, started))
            checkpoint = str(out / "stages" / results["synth"].outputs["checkpoint"])
        ckpt = open_checkpoint(checkpoint, read_headers=False)
        spec = spec_for_checkpoint(ckpt, spec_arg)
        ctx = S.RunContext(ckpt, spec, out, created, tuple(targets) or TARGETS, tuple(archs) or ("sm_90", "sm_100"),
                           gpu, gpus)  # fmt: skip
        stages = [S.spec_stage(ctx), S.coverage_stage(ctx), S.plan_stage(ctx), S.generate_stage(ctx),
                  S.compile_stage(ctx), S.validate_stage(ctx), S.package_stage(ctx)]  # fmt: skip
        if publish_repo:
            stages.append(S.publish_stage(ctx, publish_repo, tag, api_url))
        results.update(run_stages(stages, out, __version__, started))
        progress.update(task, description="dashboard")
        report = _finish(ctx, results)
    if as_json:
        emit_json(report)
    else:
        _summary(results, out)
    raise SystemExit(0 if report["ok"] else 1)


def _created(out: Path) -> datetime:
    """The run's timestamp for every report: SOURCE_DATE_EPOCH when set (reproducible outputs), else the first
    start of this OUT, kept across resumes in OUT/run.json."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    if epoch is not None:
        try:
            return datetime.fromtimestamp(int(epoch), UTC)
        except ValueError:
            raise InputError(f"SOURCE_DATE_EPOCH={epoch!r}: not an integer") from None
    marker = out / "run.json"
    if marker.is_file():
        return datetime.fromisoformat(json.loads(marker.read_text())["created"])
    created = datetime.now(UTC).replace(microsecond=0)
    write_atomic(marker, json.dumps({"created": created.isoformat()}) + "\n")
    return created


def _finish(ctx, results: dict) -> dict:
    """OUT/report.json (deterministic: statuses and summaries, no timings) and the dashboard in OUT/site."""
    from dayone.dashboard.reports import load_reports
    from dayone.dashboard.site import build_site

    report = {
        "ok": all(r.status == "pass" for r in results.values()),
        "spec": ctx.spec.name,
        "checkpoint": str(ctx.checkpoint.root),
        "created": ctx.created.isoformat(),
        "stages": [{"stage": name, "status": r.status, "summary": r.summary} for name, r in results.items()],
    }
    write_atomic(ctx.out / "report.json", json.dumps(report, indent=1) + "\n")
    reports = load_reports(sorted((ctx.out / "stages").glob("*/report-*.json")))
    build_site(reports, ctx.out / "site", pre_release=set(), gpu=ctx.gpu, gpus=ctx.gpus)
    return report


def _summary(results: dict, out: Path) -> None:
    table = Table("stage", "status", "time", "summary")
    for name, r in results.items():
        status = "[green]pass[/]" if r.status == "pass" else "[red]fail[/]"
        table.add_row(name, status, "cached" if r.cached else f"{r.seconds:.1f} s", r.summary)
    console.print(table)
    console.print(f"report: {out / 'report.json'}   dashboard: {out / 'site' / 'index.html'}")


COMMAND = run
