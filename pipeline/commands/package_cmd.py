"""`integrate package OUTDIR -o DIST`: a wheel and an sdist per generated adapter, the stage reports, a model card and
SHA256SUMS, in one flat folder ready for `integrate publish`. See docs/package.md."""

from __future__ import annotations

from pathlib import Path

import click
from dayone.core.atomic import write_atomic
from dayone.core.errors import InputError
from dayone.present import console, emit_json, error_document, plain, shown
from rich.console import Console


@click.command()
@click.argument("outdir", type=click.Path(path_type=Path))
@click.option("-o", "--out", "dist", type=click.Path(path_type=Path), required=True,
              help="DIST folder (flat; replaced as a whole).")  # fmt: skip
@click.option(
    "--spec", "spec_arg", help="Spec NAME or FILE the adapters were generated from (default: their headers')."
)
@click.option("--revision", help="Checkpoint revision (commit, tag or branch) recorded in the version and model card.")
@click.option("--public-version", is_flag=True,
              help="Version without the local +spec...rev... label (PyPI refuses local versions).")  # fmt: skip
@click.option("--report", type=click.Path(dir_okay=False, path_type=Path),
              help="Write dashboard 'package' reports (one per target) here.")  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def package(outdir, dist, spec_arg, revision, public_version, report, as_json) -> None:
    """Package the adapters `integrate generate` wrote under OUTDIR (OUTDIR/<target>/) into DIST."""
    from dayone.package import BuildError
    from dayone.package import package as run_package
    from dayone.spec.registry import load_spec

    if revision is not None and not revision.strip():
        raise InputError("--revision: empty")
    spec = load_spec(spec_arg) if spec_arg else None
    status = Console(stderr=True, highlight=False)
    try:
        with status.status("packaging") as spinner:
            result = run_package(
                outdir, dist, spec=spec, revision=revision, public_version=public_version,
                progress=lambda line: spinner.update(line),
            )  # fmt: skip
    except BuildError as err:
        if report:
            _write_reports(report, None, str(err))
        click.echo(f"error: {plain(err)}", err=True)
        click.echo("\n".join(plain(line) for line in err.log[-4000:].splitlines()), err=True)
        if as_json:  # one document on stdout, failure too
            emit_json(error_document(plain(err), BuildError.exit_code))
        raise SystemExit(BuildError.exit_code) from None
    if report:
        _write_reports(report, result, None)
    if as_json:
        emit_json(result.as_dict())
    else:
        _print(result)


def _write_reports(path: Path, result, error: str | None) -> None:
    from dayone.reports.model import Report, now

    created = now()
    if result is None:
        # A failed build names no spec reliably before discovery finished; the error says which package failed.
        text = "[]\n"
    else:
        reports = [
            Report(stage="package", spec=result.spec, target=p["target"], created=created, status="pass",
                   details={**p, "dist": result.dist, "sha256": {n: result.files[n] for n in (p["wheel"], p["sdist"])},
                            "revision": result.revision, "spec_digest": result.spec_digest})
            for p in result.packages
        ]  # fmt: skip
        text = "[\n" + ",\n".join(r.model_dump_json(indent=2) for r in reports) + "\n]\n"
    write_atomic(path, text)


def _print(result) -> None:
    for p in result.packages:
        extra = f"[{p['framework']['extra']}]"  # as pip spells it: shown escapes it once
        console.print(
            f"[bold]{p['target']}[/]: {shown(p['wheel'])}, {shown(p['sdist'])} (framework: extra {shown(extra)})"
        )
    for r in result.reports:
        console.print(f"report {shown(r['source'])} -> {shown(r['file'])}")
    console.print(
        f"{len(result.files)} files in {shown(result.dist)}, SHA256SUMS over all; model card {shown(result.model_card)}"
    )


COMMAND = package
