"""`integrate compile SPEC --arch sm_90 [--arch sm_100] [-o DIR] [--json]`: AOT cubins and the resource table."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import click
from dayone.commands.output import console, emit_json, write_atomic
from dayone.errors import InputError
from dayone.spec.registry import load_spec
from rich.progress import Progress


@click.command("compile")
@click.argument("spec_arg", metavar="SPEC")
@click.option(
    "--arch",
    "archs",
    multiple=True,
    default=("sm_90",),
    show_default=True,
    type=click.Choice(["sm_90", "sm_100"]),
    help="Target GPU arch (repeat for several).",
)
@click.option(
    "-o",
    "--output",
    type=click.Path(file_okay=False, path_type=Path),
    help="Output folder (default build/kernels/<spec>).",
)
@click.option(
    "--max-spill-bytes",
    type=click.IntRange(0),
    default=0,
    show_default=True,
    help="Fail a kernel whose register spills exceed this.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the resource table as JSON.")
def compile_cmd(
    spec_arg: str, archs: tuple[str, ...], output: Path | None, max_spill_bytes: int, as_json: bool
) -> None:
    """Compile every kernel specialisation SPEC needs, for each arch, without a GPU."""
    # The interpreter swaps @triton.jit for interpreted functions at import: nothing would be left to compile.
    os.environ.pop("TRITON_INTERPRET", None)
    from dayone.compile_stage import specializations_for
    from dayone.kernels.aot import AotError, compile_specializations, format_table

    spec = load_spec(spec_arg)
    out = output or Path("build") / "kernels" / spec.name
    specs = specializations_for(spec)
    table = []
    start = time.perf_counter()
    try:
        with Progress(console=console, transient=True, disable=as_json) as progress:
            task = progress.add_task(f"compiling {len(specs)} kernels x {len(archs)} archs", total=len(specs))
            for one in specs:
                table.extend(compile_specializations([one], tuple(archs), out / "cubin", max_spill_bytes))
                progress.advance(task)
    except AotError as err:
        raise InputError(f"{spec.name}: {err}") from None
    report = {
        "stage": "compile",
        "spec": spec.name,
        "archs": list(archs),
        "ok": True,
        "seconds": round(time.perf_counter() - start, 3),
        "kernels": [row.as_dict() for row in table],
    }
    write_atomic(out / "resources.json", json.dumps(report, indent=1) + "\n")
    if as_json:
        emit_json(report)
    else:
        click.echo(format_table(table))
        hits = sum(row.cached for row in table)
        console.print(f"{len(table)} kernel builds ({hits} from cache) in {report['seconds']:.2f} s -> {out}")


COMMAND = compile_cmd
