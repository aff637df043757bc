"""`integrate validate CHECKPOINT`: the fast tier against a reference, capture point by capture point.

Exit 0 when every metric is within the tolerance table, 1 when one is not, 2 on bad input. Runs under
`torchrun --nproc-per-node N -m dayone validate ...` too (layers split across ranks; rank 0 reports).
"""

from __future__ import annotations

from pathlib import Path

import click
from dayone.present import emit_json


@click.command()
@click.argument("checkpoint")
@click.option("--reference", default="auto", show_default=True,
              help="auto | naive (the reference tier) | transformers | golden:FILE.")  # fmt: skip
@click.option("--tokens", help="JSON file of equal-length token-id lists, or comma-separated ids (one sequence).")
@click.option("--json", "json_file", type=click.Path(dir_okay=False, path_type=Path),
              help="Write the report (a dashboard validate report) to FILE.")  # fmt: skip
@click.option("--spec", "spec_arg", help="Spec NAME or FILE (default: derived from the checkpoint's config.json).")
@click.option("--candidate", default="fast", show_default=True, help="The tier under test: fast | reference.")
@click.option("--routing", default="replay", show_default=True,
              help="replay: the candidate uses the reference's experts (top-k agreement still reported); own.")  # fmt: skip
@click.option("--reload-check/--no-reload-check", default=True, show_default=True,
              help="Reload every part after overwriting it with noise; outputs must be bitwise identical.")  # fmt: skip
@click.option("--device", default="auto", show_default=True, help="auto | cpu | cuda.")
@click.option("--kernels", default="auto", show_default=True,
              help="Fast-tier kernels: auto (Triton on a GPU, torch counterparts on a CPU) | triton | torch.")  # fmt: skip
@click.option("--print-json", is_flag=True, help="Print the report as JSON instead of tables.")
def validate(
    checkpoint: str,
    reference: str,
    tokens: str | None,
    json_file: Path | None,
    spec_arg: str | None,
    candidate: str,
    routing: str,
    reload_check: bool,
    device: str,
    kernels: str,
    print_json: bool,
) -> None:
    """Validate CHECKPOINT's numbers: CANDIDATE tier vs REFERENCE on fixed token sequences (teacher forcing)."""
    from dayone.dashboard.reports import Report, write_report
    from dayone.validate import Options
    from dayone.validate import validate as run
    from dayone.validate.report import print_report

    options = Options(reference, tokens, candidate, routing, reload_check, device, spec_arg, kernels)
    report = run(checkpoint, options)
    if "details" in report:  # rank 0 (or the only rank)
        if json_file is not None:
            write_report(json_file, Report.model_validate(report))
        if print_json:
            emit_json(report)
        else:
            print_report(report)
    raise SystemExit(0 if report["status"] == "pass" else 1)


COMMAND = validate
