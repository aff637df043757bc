"""`integrate validate CHECKPOINT`: the fast tier against a reference, capture point by capture point.

Exit 0 when every metric is within the tolerance table, 1 when one is not, 2 on bad input. Runs under
`torchrun --nproc-per-node N -m dayone validate ...` too (layers split across ranks; rank 0 reports).
"""

from __future__ import annotations

import os
from pathlib import Path

import click
from dayone.present import console, emit_json, on_a_terminal, set_step_sink, shown


@click.command()
@click.argument("checkpoint")
@click.option("--reference", default="auto", show_default=True,
              help="auto | naive (the reference tier) | transformers | golden:FILE.")  # fmt: skip
@click.option("--tokens", help="JSON file of equal-length token-id lists, or comma-separated ids (one sequence).")
@click.option("--report", "report_file", type=click.Path(dir_okay=False, path_type=Path),
              help="Also write the report (a dashboard validate report) to FILE, for `integrate dashboard`.")  # fmt: skip
@click.option("--spec", "spec_arg", help="Spec NAME or FILE (default: derived from the checkpoint's config.json).")
@click.option("--candidate", default="fast", show_default=True, help="The tier under test: fast | reference.")
@click.option("--routing", default="replay", show_default=True,
              help="replay: the candidate uses the reference's experts (top-k agreement still reported); own.")  # fmt: skip
@click.option("--reload-check/--no-reload-check", default=True, show_default=True,
              help="Reload every part after overwriting it with noise; outputs must be bitwise identical.")  # fmt: skip
@click.option("--device", default="auto", show_default=True, help="auto | cpu | cuda.")
@click.option("--kernels", default="auto", show_default=True,
              help="Fast-tier kernels: auto (Triton on a GPU, torch counterparts on a CPU) | triton | torch.")  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="Print the report as one JSON document instead of tables.")
def validate(
    checkpoint: str,
    reference: str,
    tokens: str | None,
    report_file: Path | None,
    spec_arg: str | None,
    candidate: str,
    routing: str,
    reload_check: bool,
    device: str,
    kernels: str,
    as_json: bool,
) -> None:
    """Validate CHECKPOINT's numbers: CANDIDATE tier vs REFERENCE on fixed token sequences (teacher forcing)."""
    from dayone.checkpoint import open_checkpoint
    from dayone.checkpoint.spec_source import spec_for_checkpoint

    transformers_torch_path()
    # The arguments are parsed here, once: the library gets the open checkpoint and its spec, not their names. Both
    # are read before the numerics are imported (torch: 2 s), so a missing or malformed checkpoint is refused at once.
    opened = open_checkpoint(checkpoint)
    spec = spec_for_checkpoint(opened, spec_arg)
    from dayone.reports.files import write_report
    from dayone.validate import Options
    from dayone.validate import validate as run
    from dayone.validate.report import print_report

    options = Options(reference=reference, tokens=tokens, candidate=candidate, routing=routing,
                      reload_check=reload_check, device=device, kernels=kernels)  # fmt: skip
    if on_a_terminal() and not as_json:  # rich's spinner shows the layer; off a terminal a line per layer
        with console.status("validate: starting") as status:
            set_step_sink(lambda text: status.update(shown(text)))
            verdict = run(opened, spec, options)
    else:
        verdict = run(opened, spec, options)
    report = verdict.report
    if report is not None:  # rank 0 (or the only rank)
        if report_file is not None:
            write_report(report_file, report)
        if as_json:
            emit_json(report.model_dump(mode="json"))
        else:
            print_report(report)
    raise SystemExit(0 if verdict.status == "pass" else 1)


def transformers_torch_path() -> None:
    """Make transformers, when the reference imports it, take its own torch path: hub kernels (and fla through them)
    are not the oracle. transformers reads USE_HUB_KERNELS once, at import, so this is done at the entry of the
    commands that validate (`validate`, `run`), before anything imports it; never inside the library. An explicit
    setting is left alone, and the command gives the environment back when its click context closes."""
    if "USE_HUB_KERNELS" in os.environ:
        return
    os.environ["USE_HUB_KERNELS"] = "NO"
    context = click.get_current_context(silent=True)
    if context is not None:
        context.call_on_close(lambda: os.environ.pop("USE_HUB_KERNELS", None))


COMMAND = validate
