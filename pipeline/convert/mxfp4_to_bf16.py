"""The release-day conversion of an MXFP4 checkpoint to BF16 (what Miles' tools/convert_mxfp4_to_bf16.py does).

Work is per source file: each output file keeps its source's name, is written as a stream under a temporary name
and renamed, then recorded as finished (state.py), so a rerun skips it. Ranks split the files (rank R of N takes
every N-th file in name order) and share nothing but the output folder; `finalize` then rebuilds
model.safetensors.index.json from the output headers, writes config.json without quantization_config and copies
the source's other small files (tokenizer, remote code, generation config).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from dayone.checkpoint.reader import INDEX_NAME, Checkpoint
from dayone.checkpoint.safetensors_header import read_header
from dayone.convert import state
from dayone.convert.pieces import Dequant, Piece
from dayone.convert.plan import count_pairs, owners, plan_file
from dayone.convert.side_files import copy_side_files
from dayone.convert.stream import write_stream
from dayone.core.atomic import write_atomic
from dayone.core.errors import InputError
from dayone.present import step

KIND = "mxfp4-to-bf16"


@dataclass
class FileResult:
    file: str
    status: str  # "converted" or "skipped"
    dequantized: int  # MXFP4 pairs turned into BF16
    bytes_in: int
    bytes_out: int
    seconds: float


def files_for_rank(ckpt: Checkpoint, rank: int, num_shards: int) -> list[str]:
    """Rank R of N takes every N-th file in name order."""
    return sorted(ckpt.shards)[rank::num_shards]


def plan_all(ckpt: Checkpoint) -> dict[str, list[Piece]]:
    """Plan every file up front (headers only), so bad input stops every rank before anything is written."""
    if ckpt.pickle_files:
        raise InputError(f"{ckpt.source}: pickle weights; convert reads safetensors only")
    owner = owners(ckpt)
    return {file: plan_file(ckpt, file, owner) for file in sorted(ckpt.shards)}


def prepare_output(src: Path, dst: Path, overwrite: bool) -> None:
    """Create DST, or accept it if it is empty or an earlier conversion's output (to resume); refuse anything else."""
    if dst.exists() and not dst.is_dir():
        raise InputError(f"{dst}: exists and is not a folder")
    if dst.resolve() == src.resolve():
        raise InputError(f"{dst}: is the source folder; write the conversion somewhere else")
    if dst.is_dir() and any(dst.iterdir()) and not (dst / state.STATE_DIR).is_dir() and not overwrite:
        raise InputError(f"{dst}: exists and is not empty (pass --overwrite to write into it)")
    (dst / state.STATE_DIR).mkdir(parents=True, exist_ok=True)


def convert_files(
    ckpt: Checkpoint,
    plans: dict[str, list[Piece]],
    dst: Path,
    files: list[str],
    redo: bool = False,
    progress: Callable[[int], None] | None = None,
) -> list[FileResult]:
    """Convert `files` of the source into dst, skipping those already finished (unless redo)."""
    from dayone.convert.dequant import one_thread

    results = []
    with one_thread():
        for i, file in enumerate(files, 1):  # a file of a release is GBs: off a terminal, a line as each starts
            step(f"convert: file {i} of {len(files)}: {file}")
            results.append(_convert_file(ckpt, plans[file], dst, file, redo, progress))
    return results


def _convert_file(
    ckpt: Checkpoint,
    pieces: list[Piece],
    dst: Path,
    file: str,
    redo: bool,
    progress: Callable[[int], None] | None,
) -> FileResult:
    stamp = _stamp(ckpt, file, pieces)
    bytes_in = sum(p.source.nbytes_in for p in pieces)
    if not redo and state.is_finished(dst, file, stamp, KIND):
        if progress:
            progress(bytes_in)
        return FileResult(file, "skipped", count_pairs(pieces), bytes_in, (dst / file).stat().st_size, 0)
    state.forget(dst, file)
    start = time.perf_counter()
    size = write_stream(dst / file, pieces, ckpt.shards[file].metadata or {"format": "pt"}, progress)
    state.record(dst, file, stamp, KIND)
    return FileResult(file, "converted", count_pairs(pieces), bytes_in, size, time.perf_counter() - start)


def _stamp(ckpt: Checkpoint, file: str, pieces: list[Piece]) -> dict:
    """The identity of every source file an output file is made from (its own, and any file holding a scale)."""
    paths = {ckpt.shards[file].path} | {p.source.scale_path for p in pieces if isinstance(p.source, Dequant)}
    return {path.name: state.source_stamp(path) for path in sorted(paths)}


def finalize(ckpt: Checkpoint, dst: Path, plans: dict[str, list[Piece]]) -> dict:
    """Index from the output headers, config.json without quantization_config, the source's other small files;
    temporaries left by killed runs are removed."""
    weight_map: dict[str, str] = {}
    total = 0
    for file in sorted(ckpt.shards):
        if not state.is_finished(dst, file, _stamp(ckpt, file, plans[file]), KIND):
            raise InputError(f"{dst / file}: not converted yet (or stale); run the conversion of that file first")
        header = read_header(dst / file)
        weight_map.update((name, file) for name in header.entries)
        total += header.file_size - header.data_start
    index = {"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))}
    write_atomic(dst / INDEX_NAME, json.dumps(index, indent=2) + "\n")
    config = without_quantization(ckpt.config)
    write_atomic(dst / "config.json", json.dumps(config, indent=2) + "\n")
    copied = copy_side_files(ckpt.root, dst)
    for file in ckpt.shards:  # temporaries of killed runs (every file is finished, so none is being written)
        for stale in dst.glob(f".{file}.tmp-*"):
            stale.unlink(missing_ok=True)
    return {"tensors": len(weight_map), "bytes": total, "files": len(ckpt.shards), "copied": copied}


def without_quantization(config: dict) -> dict:
    """config.json minus quantization_config, at the top and inside text_config (where K3 keeps it)."""
    config = json.loads(json.dumps(config))
    config.pop("quantization_config", None)
    if isinstance(config.get("text_config"), dict):
        config["text_config"].pop("quantization_config", None)
    return config


def summary(results: list[FileResult], seconds: float) -> dict:
    converted = [r for r in results if r.status == "converted"]
    bytes_in = sum(r.bytes_in for r in converted)
    return {
        "files": len(results),
        "converted": len(converted),
        "skipped": len(results) - len(converted),
        "dequantized": sum(r.dequantized for r in converted),
        "bytes_in": bytes_in,
        "bytes_out": sum(r.bytes_out for r in converted),
        "seconds": round(seconds, 3),
        "input_bytes_per_s": round(bytes_in / seconds) if bytes_in and seconds > 0 else None,
        "per_file": [asdict(r) for r in results],
    }
