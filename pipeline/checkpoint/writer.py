"""Write checkpoints in the release format: sharded safetensors, model.safetensors.index.json, config.json.

Everything is written into a sibling temporary folder and renamed into place at the end, so a killed run leaves
either nothing or a complete checkpoint. Tensor data comes from a callback; with none, the data regions are left
sparse (a hole in the file), which is how a full-size skeleton of a 1.5 TB release costs almost no disk.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from pathlib import Path

from dayone.checkpoint.reader import INDEX_NAME
from dayone.core.atomic import staged_folder
from dayone.core.errors import InputError
from dayone.spec.manifest import Tensor

DataSource = Callable[[Tensor], bytes]


def shard_name(index: int, count: int) -> str:
    return f"model-{index + 1:05d}-of-{count:05d}.safetensors"


def plan_shards(tensors: Iterable[Tensor], num_shards: int) -> list[list[Tensor]]:
    """Split tensors, in order, into num_shards runs of roughly equal bytes (none empty)."""
    tensors = list(tensors)
    num_shards = max(1, min(num_shards, len(tensors)))
    total = sum(t.nbytes for t in tensors)
    shards: list[list[Tensor]] = [[] for _ in range(num_shards)]
    cumulative, shard = 0, 0
    for i, t in enumerate(tensors):
        remaining_tensors = len(tensors) - i
        remaining_shards = num_shards - shard - 1
        # Move on when this shard has its share, but never leave later shards without a tensor.
        if (
            shards[shard]
            and shard < num_shards - 1
            and (cumulative >= total * (shard + 1) / num_shards or remaining_tensors <= remaining_shards)
        ):
            shard += 1
        shards[shard].append(t)
        cumulative += t.nbytes
    return shards


def encode_header(tensors: list[Tensor], metadata: dict[str, str]) -> tuple[bytes, int]:
    """The length-prefixed header for `tensors` laid out in order; returns (bytes, data size)."""
    entries: dict[str, object] = {"__metadata__": metadata}
    offset = 0
    for t in tensors:
        entries[t.name] = {"dtype": t.dtype, "shape": list(t.shape), "data_offsets": [offset, offset + t.nbytes]}
        offset += t.nbytes
    raw = json.dumps(entries, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)  # safetensors pads the header to 8 bytes so data starts aligned
    return len(raw).to_bytes(8, "little") + raw, offset


def write_shard(path: Path, tensors: list[Tensor], data: DataSource | None) -> None:
    header, size = encode_header(tensors, {"format": "pt"})
    with open(path, "wb") as f:
        f.write(header)
        if data is None:
            f.truncate(len(header) + size)
            return
        for t in tensors:
            chunk = data(t)
            if len(chunk) != t.nbytes:
                raise ValueError(f"data for {t.name} has {len(chunk)} bytes, expected {t.nbytes}")
            f.write(chunk)


def write_checkpoint(
    out_dir: Path,
    config: dict,
    tensors: list[Tensor],
    num_shards: int,
    data: DataSource | None = None,
    extra_files: dict[str, str] | None = None,
    overwrite: bool = False,
    progress: Callable[[int, int], None] | None = None,
) -> Path:
    """Write a complete checkpoint folder atomically; returns out_dir."""
    out_dir = Path(out_dir)
    if out_dir.exists() and any(out_dir.iterdir()) and not overwrite:
        raise InputError(f"{out_dir}: exists and is not empty (pass --overwrite to replace it)")
    with staged_folder(out_dir) as staging:
        shards = plan_shards(tensors, num_shards)
        weight_map: dict[str, str] = {}
        for i, shard in enumerate(shards):
            name = shard_name(i, len(shards))
            write_shard(staging / name, shard, data)
            weight_map.update((t.name, name) for t in shard)
            if progress:
                progress(i + 1, len(shards))
        index = {"metadata": {"total_size": sum(t.nbytes for t in tensors)}, "weight_map": weight_map}
        (staging / INDEX_NAME).write_text(json.dumps(index, indent=2) + "\n")
        (staging / "config.json").write_text(json.dumps(config, indent=1) + "\n")
        for name, text in (extra_files or {}).items():
            (staging / name).write_text(text)
    return out_dir
