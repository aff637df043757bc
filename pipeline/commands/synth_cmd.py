"""`integrate synth SPEC --skeleton -o DIR`: a checkpoint in the release format before the weights exist."""

from __future__ import annotations

from pathlib import Path

import click
from dayone.checkpoint.writer import write_checkpoint
from dayone.commands.output import console, human_bytes
from dayone.errors import InputError
from dayone.spec.hf_config import to_hf_config
from dayone.spec.manifest import build_manifest
from dayone.spec.registry import load_spec
from rich.progress import Progress


@click.command()
@click.argument("spec_arg", metavar="SPEC")
@click.option("--skeleton", is_flag=True, help="Full size, real headers, data regions left sparse (no disk used).")
@click.option("-o", "--output", required=True, type=click.Path(file_okay=False, path_type=Path))
@click.option("--shards", type=click.IntRange(1, 100000), help="Shard count (default: the release's).")
@click.option("--overwrite", is_flag=True, help="Replace an existing output folder.")
def synth(spec_arg: str, skeleton: bool, output: Path, shards: int | None, overwrite: bool) -> None:
    """Write a synthetic checkpoint of SPEC in the release's format."""
    if not skeleton:
        raise InputError("synth: only --skeleton is available so far")
    spec = load_spec(spec_arg)
    manifest = build_manifest(spec)
    num_shards = shards or spec.release.num_shards or 1
    with Progress(console=console, transient=True) as progress:
        task = progress.add_task(f"writing {num_shards} shards", total=num_shards)
        write_checkpoint(
            output,
            to_hf_config(spec),
            list(manifest.tensors),
            num_shards,
            data=None,
            overwrite=overwrite,
            progress=lambda done, total: progress.update(task, completed=done),
        )
    console.print(
        f"wrote {output}: {len(manifest):,} tensors, {human_bytes(manifest.nbytes)} in {num_shards} shards (sparse)"
    )


COMMAND = synth
