"""`integrate synth SPEC (--scale tiny|small|faithful | --skeleton) -o DIR`: a checkpoint in the release format before the
weights exist: with real, deterministic weights at a scaled-down width, or full size with sparse data regions."""

from __future__ import annotations

from pathlib import Path

import click
from dayone.checkpoint.writer import write_checkpoint
from dayone.core.errors import InputError
from dayone.present import console, human_bytes, shown
from dayone.spec.hf_config import to_hf_config
from dayone.spec.manifest import build_manifest
from dayone.spec.registry import load_spec
from rich.progress import Progress

SCALE_NAMES = ("tiny", "small", "faithful")  # dayone.synth.SCALE_NAMES, without importing torch for --help


@click.command()
@click.argument("spec_arg", metavar="SPEC")
@click.option("--scale", type=click.Choice(SCALE_NAMES), help="Real weights at this width, structure kept; faithful "
              "keeps every per-head and per-expert width (fewer layers and experts, see dayone.synth.faithful).")  # fmt: skip
@click.option("--layers", type=int, help="Keep the first N layers of the layer table (default: all).")
@click.option("--seed", type=int, default=0, show_default=True, help="Same seed, byte-identical files.")
@click.option("--skeleton", is_flag=True, help="Full size, real headers, data regions left sparse (no disk used).")
@click.option("-o", "--output", required=True, type=click.Path(file_okay=False, path_type=Path))
@click.option("--shards", type=click.IntRange(1, 100000), help="Shard count (default: the release's).")
@click.option("--overwrite", is_flag=True, help="Replace an existing output folder.")
def synth(
    spec_arg: str,
    scale: str | None,
    layers: int | None,
    seed: int,
    skeleton: bool,
    output: Path,
    shards: int | None,
    overwrite: bool,
) -> None:
    """Write a synthetic checkpoint of SPEC in the release's format (names, dtypes, shards, config.json)."""
    if skeleton == (scale is not None):
        raise InputError("synth: pass exactly one of --scale tiny|small|faithful (real weights) and --skeleton")
    if skeleton and layers is not None:
        raise InputError("synth: --layers needs --scale (a skeleton is the whole release)")
    spec = load_spec(spec_arg)
    if scale is not None:
        from dayone.synth import scaled_spec

        spec = scaled_spec(spec, scale, layers)
    manifest = build_manifest(spec)
    num_shards = shards or spec.release.num_shards or 1
    with Progress(console=console, transient=True) as progress:
        task = progress.add_task(f"writing {num_shards} shards", total=num_shards)

        def advance(done: int, total: int) -> None:
            progress.update(task, completed=done)

        if skeleton:
            write_checkpoint(
                output, to_hf_config(spec), list(manifest.tensors), num_shards, data=None, overwrite=overwrite,
                progress=advance,
            )  # fmt: skip
        else:
            from dayone.synth import write_synthetic

            write_synthetic(spec, output, seed, num_shards, overwrite, advance)
    what = "sparse" if skeleton else f"{shown(spec.name)}, {spec.num_layers} layers, seed {seed}"
    console.print(
        f"wrote {shown(output)}: {len(manifest):,} tensors, {human_bytes(manifest.nbytes)} in {num_shards} shards ({what})"
    )


COMMAND = synth
