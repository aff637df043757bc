"""`integrate conform ADAPTER_DIR CHECKPOINT`: the generated inference adapters judged by the pinned SGLang and vLLM
releases themselves, each in its peer environment, at world size 1 and 2 (see dayone.conform). Exit 1 when a level
fails; a level that cannot run here is "not run" with its reason."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click
from dayone.core.atomic import write_atomic
from dayone.core.errors import InputError
from dayone.present import console, emit_json, on_a_terminal, set_step_sink, shown

if TYPE_CHECKING:
    from dayone.conform.results import TargetReport


@click.command()
@click.argument("adapters", metavar="ADAPTER_DIR", type=click.Path(file_okay=False, path_type=Path))
@click.argument("checkpoint", type=click.Path(file_okay=False, path_type=Path))
@click.option("--target", "targets", type=click.Choice(("sglang", "vllm")), multiple=True,
              help="Engine(s) to judge (default: every one generated under ADAPTER_DIR).")  # fmt: skip
@click.option("--world-size", "world_sizes", type=click.IntRange(1, 8), multiple=True, default=(1, 2),
              show_default=True, help="Tensor-parallel world sizes (repeatable).")  # fmt: skip
@click.option("--spec", "spec_arg", help="Spec NAME or FILE instead of deriving one from the checkpoint.")
@click.option("-o", "--out", "out_file", type=click.Path(dir_okay=False, path_type=Path),
              help="Write conform.json here.")  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def conform(adapters, checkpoint, targets, world_sizes, spec_arg, out_file, as_json) -> None:
    """Judge the generated SGLang / vLLM adapters in the pinned frameworks themselves, at each world size.

    Each adapter is installed into its framework's peer environment and the levels reached are reported:
    discovered, accepted, built, loaded, forward. Exit 1 when a level fails or a target's peer is not installed
    (nothing of it ran)."""
    from dayone.checkpoint.reader import open_local
    from dayone.checkpoint.spec_source import spec_for_checkpoint
    from dayone.conform.driver import conform_all

    if not adapters.is_dir():
        raise InputError(f"{adapters}: not a folder (the output folder of integrate generate)")
    spec = spec_for_checkpoint(open_local(checkpoint), spec_arg)
    sizes = tuple(dict.fromkeys(world_sizes))
    if on_a_terminal() and not as_json:  # rich's spinner shows the level; off a terminal a line per level
        with console.status("conform: starting") as status:
            set_step_sink(lambda text: status.update(shown(text)))
            reports = conform_all(adapters, checkpoint, spec, sizes, targets or None)
    else:
        reports = conform_all(adapters, checkpoint, spec, sizes, targets or None)
    if not reports:
        raise InputError(f"{adapters}: holds no generated sglang/ or vllm/ adapter (run integrate generate first)")
    # ok: no level failed and every target ran (a target whose peer is absent ran nothing: never ok)
    ran = all(any(lv.status != "not run" for run in r.runs for lv in run.levels.values()) for r in reports)
    document = {"spec": spec.name, "ok": ran and all(r.passed for r in reports),
                "targets": [r.as_dict() for r in reports]}  # fmt: skip
    if out_file:
        import json

        write_atomic(out_file, json.dumps(document, indent=1) + "\n")
    if as_json:
        emit_json(document)
    else:
        _print(reports)
    raise SystemExit(0 if document["ok"] else 1)


def _print(reports: list[TargetReport]) -> None:
    colour = {"pass": "green", "fail": "red", "not run": "yellow"}
    for report in reports:
        console.print(f"[bold]{report.target}[/] {report.version}")
        for run in report.runs:
            console.print(f"  world size {run.world_size}")
            for level, entry in run.levels.items():
                status = entry.status
                console.print(f"    [{colour[status]}]{status:8}[/] {level:10} {shown(entry.detail)}", highlight=False)


COMMAND = conform
