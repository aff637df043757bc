"""`integrate convert mxfp4-to-bf16 SRC -o DST`: the release-day dequantization, resumable and shardable.

One process (no rank given): convert every file, then finalize. `--shard-rank R --num-shards N`: convert only
rank R's files (every N-th), for N independent processes or machines; then run `--finalize` once. Under torchrun
(RANK / WORLD_SIZE set, no --shard-rank) each rank takes its files, the ranks meet at a gloo all-reduce, and rank 0
finalizes when every rank succeeded.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import click
from dayone.checkpoint import open_checkpoint
from dayone.checkpoint.safetensors_header import gc_paused
from dayone.core.errors import InputError
from dayone.present import console, emit_json, human_bytes, shown


@click.group()
def convert() -> None:
    """Convert checkpoints between storage formats."""


@convert.command("mxfp4-to-bf16")
@click.argument("src")
@click.option("-o", "--output", "dst", required=True, type=click.Path(path_type=Path), help="Output folder.")
@click.option("--shard-rank", type=int, help="Convert only this rank's files (every N-th, from R).")
@click.option("--num-shards", type=int, help="How many ranks share the files.")
@click.option("--finalize", "finalize_only", is_flag=True, help="Only write the index, config and side files.")
@click.option("--overwrite", is_flag=True, help="Write into a non-empty folder and redo every file.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def mxfp4_to_bf16(
    src: str,
    dst: Path,
    shard_rank: int | None,
    num_shards: int | None,
    finalize_only: bool,
    overwrite: bool,
    as_json: bool,
) -> None:
    """Dequantize every MXFP4 weight_packed/weight_scale pair of SRC to a BF16 weight in DST.

    Other tensors are copied byte for byte, file names are kept, each file is written atomically and skipped on
    rerun once finished; finalize rebuilds the index and writes config.json without quantization_config.
    """
    from dayone.convert import mxfp4_to_bf16 as job

    rank, world, distributed = _ranks(shard_rank, num_shards, finalize_only)
    with gc_paused():  # ~500k header entries and plan pieces for K3, none of them in cycles
        ckpt = open_checkpoint(src)
        plans = job.plan_all(ckpt)
    if finalize_only:
        if not (dst / job.state.STATE_DIR).is_dir():
            raise InputError(f"{dst}: holds no conversion to finalize (convert the files first)")
        report = {"finalized": job.finalize(ckpt, dst, plans)}
        _print(report, as_json, rank=None)
        return

    group = _init_group() if distributed else None
    job.prepare_output(ckpt.root, dst, overwrite)
    files = job.files_for_rank(ckpt, rank, world)
    start = time.perf_counter()
    failure: InputError | None = None
    results = []
    try:
        results = _convert(job, ckpt, plans, dst, files, overwrite, as_json)
    except InputError as err:
        if group is None:
            raise
        failure = err
    report: dict = {"rank": rank, "num_shards": world, **job.summary(results, time.perf_counter() - start)}
    if group is not None:
        failed = _all_sum(0 if failure is None else 1)
        if failure is not None:
            raise failure
        if failed:
            raise InputError(f"{dst}: {failed} rank(s) failed; index not written (rerun to resume)")
        if rank == 0:
            try:
                report["finalized"] = job.finalize(ckpt, dst, plans)
            except InputError as err:
                failure = err
        if _all_sum(0 if failure is None else 1):
            raise failure or InputError(f"{dst}: rank 0 could not finalize")
        _destroy_group()
    elif shard_rank is None:
        report["finalized"] = job.finalize(ckpt, dst, plans)
    _print(report, as_json, rank=rank if world > 1 else None)


def _ranks(shard_rank: int | None, num_shards: int | None, finalize_only: bool) -> tuple[int, int, bool]:
    """(rank, world size, under torchrun)."""
    if (shard_rank is None) != (num_shards is None):
        raise InputError("--shard-rank and --num-shards: give both or neither")
    if num_shards is not None and shard_rank is not None:
        if num_shards < 1 or not 0 <= shard_rank < num_shards:
            raise InputError(f"--shard-rank {shard_rank} --num-shards {num_shards}: need 0 <= rank < num-shards")
        if finalize_only:
            raise InputError("--finalize is a separate step: run it once, without --shard-rank, after every rank")
        return shard_rank, num_shards, False
    if finalize_only:
        return 0, 1, False
    env_rank, env_world = os.environ.get("RANK"), os.environ.get("WORLD_SIZE")
    if env_rank is None or env_world is None:
        return 0, 1, False
    try:
        rank, world = int(env_rank), int(env_world)
    except ValueError:
        raise InputError(f"RANK={env_rank!r} WORLD_SIZE={env_world!r}: not integers") from None
    if world < 1 or not 0 <= rank < world:
        raise InputError(f"RANK={rank} WORLD_SIZE={world}: need 0 <= RANK < WORLD_SIZE")
    return rank, world, world > 1


def _init_group():
    import torch.distributed as dist

    dist.init_process_group("gloo")
    return dist.group.WORLD


def _all_sum(value: int) -> int:
    import torch
    import torch.distributed as dist

    t = torch.tensor([value], dtype=torch.int64)
    dist.all_reduce(t)
    return int(t.item())


def _destroy_group() -> None:
    import torch.distributed as dist

    dist.destroy_process_group()


def _convert(job, ckpt, plans, dst, files, redo, as_json):
    if as_json or not console.is_terminal:
        return job.convert_files(ckpt, plans, dst, files, redo=redo)
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TransferSpeedColumn

    total = sum(p.source.nbytes_in for f in files for p in plans[f])
    columns = (TextColumn("converting"), BarColumn(), DownloadColumn(), TransferSpeedColumn())
    with Progress(*columns, console=console, transient=True) as progress:
        task = progress.add_task("convert", total=total)
        return job.convert_files(ckpt, plans, dst, files, redo=redo, progress=lambda n: progress.advance(task, n))


def _print(report: dict, as_json: bool, rank: int | None) -> None:
    if as_json:
        emit_json(report)
        return
    who = f"rank {rank}: " if rank is not None else ""
    if "files" in report:
        rate = report["input_bytes_per_s"]
        console.print(
            f"{who}{report['converted']} files converted, {report['skipped']} already finished; "
            f"{report['dequantized']:,} MXFP4 pairs -> BF16; {human_bytes(report['bytes_in'])} read, "
            f"{human_bytes(report['bytes_out'])} written in {report['seconds']:.1f} s"
            + (f" ({human_bytes(rate)}/s)" if rate else "")
        )
    final = report.get("finalized")
    if final:
        console.print(
            f"{who}finalized: index of {final['tensors']:,} tensors in {final['files']} files "
            f"({human_bytes(final['bytes'])}), config.json without quantization_config"
            + (f", copied {shown(', '.join(final['copied']))}" if final["copied"] else "")  # the checkpoint's names
        )


COMMAND = convert
