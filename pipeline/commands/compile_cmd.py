"""`integrate compile SPEC --arch sm_90 [--arch sm_100] [-o DIR] [--json] [--autotune]`: AOT cubins, the resource
table, and with --autotune on a GPU the fastest correct config of each tunable kernel for that GPU's arch."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import click
from dayone.core.atomic import write_atomic
from dayone.core.errors import InputError
from dayone.core.vocabulary import ARCHS
from dayone.present import console, emit_json, shown, step
from dayone.spec.registry import load_spec

NO_GPU = "--autotune needs a CUDA GPU; compile without it here"


@click.command("compile")
@click.argument("spec_arg", metavar="SPEC")
@click.option(
    "--arch",
    "archs",
    multiple=True,
    default=("sm_90",),
    show_default=True,
    type=click.Choice(ARCHS),
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
@click.option(
    "--autotune",
    is_flag=True,
    help="On a CUDA GPU: time each tunable kernel's candidate configs there, compile the winners for its arch.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the resource table as JSON.")
def compile_cmd(
    spec_arg: str, archs: tuple[str, ...], output: Path | None, max_spill_bytes: int, autotune: bool, as_json: bool
) -> None:
    """Compile every kernel specialisation SPEC needs, for each arch, without a GPU."""
    compiling_process()
    from dayone.compile_stage import kernel_cache, plan_key
    from dayone.kernels.aot import AotError, copy_cubins, format_table, load_plan, save_plan

    tuned_arch = _autotune_arch(archs) if autotune else None
    spec = load_spec(spec_arg)
    out = output or Path("build") / "kernels" / spec.name
    # OUT/cubin is the cache unless $DAYONE_KERNEL_CACHE names a shared one; OUT/cubin then gets copies of the cubins.
    cache = kernel_cache(out / "cubin")
    start = time.perf_counter()
    # A compile whose plan key (spec dims, archs, kernel sources, Triton version) was built before is a lookup that
    # imports neither triton nor torch; autotuned builds depend on the GPU's timings and are never looked up.
    key = None if tuned_arch else plan_key(spec, archs)
    tuned = []
    try:
        table = load_plan(cache, key, max_spill_bytes) if key else None
        if table is None:
            tuned, table = _build(spec, archs, cache, max_spill_bytes, tuned_arch, as_json)
            if key:
                save_plan(cache, key, table)
        if cache != out / "cubin":
            copy_cubins(table, cache, out / "cubin")
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
    if tuned_arch:
        import torch

        report["autotune"] = {
            "arch": tuned_arch,
            "device": torch.cuda.get_device_name(),
            "kernels": [t.as_dict() for t in tuned],
        }
    write_atomic(out / "resources.json", json.dumps(report, indent=1) + "\n")
    if as_json:
        emit_json(report)
    else:
        click.echo(format_table(table))
        if tuned_arch:
            from dayone.kernels.autotune import format_tuned

            click.echo(format_tuned(tuned))
        hits = sum(row.cached for row in table)
        console.print(f"{len(table)} kernel builds ({hits} from cache) in {report['seconds']:.2f} s -> {shown(out)}")


def _build(spec, archs: tuple[str, ...], cache: Path, max_spill_bytes: int, tuned_arch: str | None, quiet: bool):
    """(autotuning results, resource table): compile (or find in the cubin cache) every kernel instance."""
    from dayone.compile_stage import build_plan, specializations_for
    from dayone.kernels.aot import compile_specializations
    from rich.progress import Progress

    specs = specializations_for(spec)
    tuned = _autotune(spec, tuned_arch, cache, max_spill_bytes, quiet) if tuned_arch else []
    table = []
    with Progress(console=console, transient=True, disable=quiet) as progress:
        task = progress.add_task(f"compiling {len(specs)} kernels x {len(archs)} archs", total=len(specs))
        for i, builds in enumerate(build_plan(specs, archs, tuned), 1):
            # off a terminal (rich draws nothing there) a timestamped line per kernel on stderr, as `run` shows
            step(f"compile: kernel {i} of {len(specs)}: {specs[i - 1].kernel}")
            for one, arch in builds:
                table.extend(compile_specializations([one], (arch,), cache, max_spill_bytes))
            progress.advance(task)
    return tuned, table


def compiling_process() -> None:
    """Make this process one that compiles kernels: Triton's interpreter (TRITON_INTERPRET=1, which tests set to run
    kernels on a CPU) swaps @triton.jit for interpreted functions at import, leaving nothing to compile. Done once,
    at the command's entry (`compile`, `run`), before anything imports a kernel; never inside a stage. The setting
    comes back when the command's click context closes, so a caller that runs the command in its own process (a
    test's CliRunner, a notebook) keeps its interpreter."""
    interpret = os.environ.pop("TRITON_INTERPRET", None)
    context = click.get_current_context(silent=True)
    if interpret is not None and context is not None:
        context.call_on_close(lambda: os.environ.__setitem__("TRITON_INTERPRET", interpret))


def _autotune_arch(archs: tuple[str, ...]) -> str:
    """This machine's GPU arch, which must be one of the targets; bad input otherwise."""
    from dayone.kernels.aot import SHARED_LIMIT
    from dayone.kernels.autotune import gpu_arch

    arch = gpu_arch()
    if arch is None:
        raise InputError(NO_GPU)
    if arch not in SHARED_LIMIT:
        raise InputError(f"--autotune: this GPU is {arch}; kernels compile for {', '.join(sorted(SHARED_LIMIT))} only")
    if arch not in archs:
        raise InputError(f"--autotune tunes for this GPU's {arch}, which is not among --arch {' '.join(archs)}")
    return arch


def _autotune(spec, arch: str, cache: Path, max_spill_bytes: int, quiet: bool) -> list:
    from dayone.compile_stage import candidates_for
    from dayone.kernels.autotune import autotune
    from rich.progress import Progress

    candidates = candidates_for(spec)
    with Progress(console=console, transient=True, disable=quiet) as progress:
        task = progress.add_task(f"autotuning {len(candidates)} kernels on {arch}", total=len(candidates))
        return autotune(
            candidates, arch, cache, max_spill_bytes=max_spill_bytes, progress=lambda _: progress.advance(task)
        )


COMMAND = compile_cmd
