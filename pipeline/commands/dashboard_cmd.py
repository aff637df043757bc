"""`integrate dashboard REPORTS... -o SITE`: the static compatibility dashboard built from stage reports."""

from __future__ import annotations

from pathlib import Path

import click
from dayone.dashboard.matrix import build_matrix
from dayone.dashboard.serve import make_server
from dayone.dashboard.site import build_site
from dayone.present import console, emit_json, plain, shown
from dayone.reports.files import load_reports
from dayone.spec.planner import GPUS


@click.command()
@click.argument("reports", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option(
    "-o",
    "--output",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Site folder (replaced whole; only a folder this command built).",
)
@click.option(
    "--pre-release",
    "pre_release",
    multiple=True,
    metavar="SPEC",
    help="SPEC has no weights yet: its weight-bound stages show 'waiting for weights'. Repeatable.",
)
@click.option("--gpu", type=click.Choice(sorted(GPUS)), default="h200", show_default=True, help="For the plan.")
@click.option("--gpus", type=click.IntRange(1, 4096), default=8, show_default=True, help="For the plan.")
@click.option("--serve", is_flag=True, help="Then serve the site on 127.0.0.1 until interrupted.")
@click.option("--port", type=click.IntRange(0, 65535), default=8000, show_default=True, help="Port for --serve.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (the matrix states).")
def dashboard(
    reports: tuple[Path, ...],
    output: Path,
    pre_release: tuple[str, ...],
    gpu: str,
    gpus: int,
    serve: bool,
    port: int,
    as_json: bool,
) -> None:
    """Build the dashboard from REPORTS (report files, `inspect --json` files, or folders of them)."""
    loaded = load_reports(list(reports))
    site = build_site(loaded, output, pre_release=set(pre_release), gpu=gpu, gpus=gpus)
    models = build_matrix(loaded, set(pre_release))
    if as_json:
        emit_json(
            {
                "site": str(site),
                "reports": len(loaded),
                "cells": [
                    {"spec": c.spec, "stage": c.stage, "target": c.target, "state": c.state, "page": c.page}
                    for m in models
                    for c in m.cells.values()
                ],
            }
        )
    else:
        console.print(f"wrote {shown(site / 'index.html')}: {len(models)} models from {len(loaded)} reports")
    if serve:
        server = make_server(site, port)
        # click.echo, not rich: one unwrapped, flushed line that scripts (and the test) can read the URL from.
        # With --json, stdout holds the one JSON document: the line goes to stderr.
        click.echo(f"serving http://127.0.0.1:{server.server_address[1]}/ from {plain(site)} (Ctrl-C stops)",
                   err=as_json)  # fmt: skip
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            click.echo("stopped", err=as_json)
        finally:
            server.server_close()


COMMAND = dashboard
