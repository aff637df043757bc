"""`integrate prune SRC -o DST --layers 0-3 [--experts 64] | --cover`: a small debug checkpoint of a release."""

from __future__ import annotations

from pathlib import Path

import click
from dayone.checkpoint import open_checkpoint
from dayone.checkpoint.safetensors_header import gc_paused
from dayone.checkpoint.spec_source import spec_for_checkpoint
from dayone.core.errors import InputError
from dayone.present import console, emit_json, human_bytes, shown


@click.command()
@click.argument("src")
@click.option("-o", "--output", "dst", required=True, type=click.Path(path_type=Path), help="Output folder.")
@click.option("--layers", "layers_arg", help="Layers to keep, 0-based: '0-3', '0,1,3,12', '0-2,12'.")
@click.option("--cover", is_flag=True, help="Keep the smallest set of layers covering every layer combination.")
@click.option("--experts", type=int, help="Keep the first E routed experts (router sliced to match).")
@click.option("--spec", "spec_arg", help="Spec NAME or FILE of SRC (default: derived from its config.json).")
@click.option("--shards", type=click.IntRange(1, 100000), help="Output shard count (default: ~5 GB each).")
@click.option("--overwrite", is_flag=True, help="Replace an existing output folder.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def prune(
    src: str,
    dst: Path,
    layers_arg: str | None,
    cover: bool,
    experts: int | None,
    spec_arg: str | None,
    shards: int | None,
    overwrite: bool,
    as_json: bool,
) -> None:
    """Write a pruned copy of SRC: the chosen layers renumbered 0..n-1, the first E experts, a rewritten config.

    --cover picks the fewest layers holding every (attention kind, FFN kind, residual snapshot or not) combination
    of the spec, each doing in the pruned model what it did in the source. Global and vision tensors are kept.
    """
    from dayone.prune import cover as cover_layers
    from dayone.prune import parse_layers, plan_prune, select, write_pruned
    from dayone.prune.config import lists_ffn_kinds

    if (layers_arg is None) == (not cover):
        raise InputError("prune: give either --layers or --cover")
    with gc_paused():
        ckpt = open_checkpoint(src)
        spec = spec_for_checkpoint(ckpt, spec_arg)
    if cover:
        selection = cover_layers(spec, dense_first=not lists_ffn_kinds(ckpt.config))
    else:
        selection = select(spec, parse_layers(layers_arg or "", spec.num_layers))
    plan = plan_prune(ckpt, spec, selection, experts)
    if as_json or not console.is_terminal:
        written = write_pruned(ckpt, plan, dst, shards, overwrite)
    else:
        from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn

        with Progress(TextColumn("pruning"), BarColumn(), DownloadColumn(), console=console, transient=True) as bar:
            task = bar.add_task("prune", total=plan.nbytes)
            written = write_pruned(ckpt, plan, dst, shards, overwrite, progress=lambda n: bar.advance(task, n))

    rows = [
        {"layer": new, "source_layer": i, "attention": spec.layers[i].attention, "ffn": spec.layers[i].ffn,
         "snapshot": spec.layers[i].snapshot}
        for new, i in enumerate(selection.layers)
    ]  # fmt: skip
    report = {
        "output": str(dst),
        "layers": list(selection.layers),
        "table": rows,
        "attn_res_block_size": selection.block_size,
        "source_attn_res_block_size": spec.residual.block_size,
        "snapshot_moved": list(selection.moved),
        "experts": experts if experts is not None else (spec.moe.num_experts if spec.moe else None),
        **written,
    }
    if as_json:
        emit_json(report)
        return
    console.print(
        f"wrote {shown(dst)}: layers {report['layers']} of {spec.num_layers} -> 0..{len(rows) - 1}"
        + (f", {report['experts']} experts" if report["experts"] is not None else "")
        + f"; {written['tensors']:,} tensors, {human_bytes(written['bytes'])} in {written['shards']} shards"
    )
    for row in rows:
        console.print(
            f"  layer {row['layer']} (was {row['source_layer']}): {row['attention']} + {row['ffn']}"
            + (" + snapshot" if row["snapshot"] else "")
        )
    if selection.block_size is not None and selection.block_size != spec.residual.block_size:
        console.print(f"  attn_res_block_size {spec.residual.block_size} -> {selection.block_size} (keeps snapshots)")
    if selection.moved:
        console.print(
            f"  [yellow]note[/]: snapshot flag differs from the source for layers {list(selection.moved)} "
            f"(block size {selection.block_size} kept; no block size preserves them)"
        )


COMMAND = prune
