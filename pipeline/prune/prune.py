"""The small debug checkpoint: chosen layers renumbered 0..n-1, the first E experts, the router sliced to match.

Every output tensor is a prefix of a source tensor's bytes (a router's first E rows, or the whole tensor), so the
output is streamed straight from the source files, never loaded. Before anything is written, the spec derived from
the rewritten config.json is checked against the planned tensors: the output inspects as covered by construction,
or the prune stops with the first mismatch named.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from dayone.checkpoint.reader import INDEX_NAME, Checkpoint
from dayone.checkpoint.writer import plan_shards, shard_name
from dayone.convert.pieces import Copy, Piece
from dayone.convert.side_files import copy_side_files
from dayone.convert.stream import write_stream
from dayone.core.atomic import staged_folder
from dayone.core.errors import InputError
from dayone.prune.config import pruned_config
from dayone.prune.layers import Selection
from dayone.spec.derive import derive_spec
from dayone.spec.manifest import DTYPE_BYTES, build_manifest
from dayone.spec.schema import ModelSpec

SHARD_BYTES = 5 * 10**9  # default output shard size


@dataclass
class PrunePlan:
    selection: Selection
    num_experts: int | None
    config: dict
    pieces: list[Piece]  # in the pruned spec's manifest order

    @property
    def nbytes(self) -> int:
        return sum(p.source.nbytes_in for p in self.pieces)


def plan_prune(ckpt: Checkpoint, spec: ModelSpec, selection: Selection, num_experts: int | None) -> PrunePlan:
    where = f"{ckpt.source}/config.json"
    if ckpt.pickle_files:
        raise InputError(f"{ckpt.source}: pickle weights; prune reads safetensors only")
    if num_experts is not None:
        if spec.moe is None:
            raise InputError(f"--experts {num_experts}: {spec.name} has no MoE layers")
        if not 1 <= num_experts <= spec.moe.num_experts:
            raise InputError(f"--experts {num_experts}: must be between 1 and {spec.moe.num_experts}")
    config = pruned_config(ckpt.config, spec, selection, num_experts, where)
    renumber = {source: new for new, source in enumerate(selection.layers)}
    layer_name = re.compile(rf"^{re.escape(spec.checkpoint.prefix)}layers\.(\d+)\.(.+)$")
    moe = spec.checkpoint.moe_block
    expert_name = re.compile(rf"^{re.escape(moe)}\.experts\.(\d+)\.")
    router = {f"{moe}.gate.weight", f"{moe}.gate.e_score_correction_bias"}

    pieces: list[Piece] = []
    for file, header in sorted(ckpt.shards.items()):
        for name, entry in header.entries.items():
            shape = tuple(entry["shape"])
            begin, end = (header.data_start + offset for offset in entry["data_offsets"])
            match = layer_name.match(name)
            if match:
                source_layer, rest = int(match.group(1)), match.group(2)
                if source_layer not in renumber:
                    continue
                name = f"{spec.checkpoint.prefix}layers.{renumber[source_layer]}.{rest}"
                if num_experts is not None:
                    expert = expert_name.match(rest)
                    if expert and int(expert.group(1)) >= num_experts:
                        continue
                    if rest in router and shape and spec.layers[source_layer].ffn == "moe":
                        shape = (num_experts, *shape[1:])
                        end = begin + math.prod(shape) * DTYPE_BYTES[entry["dtype"]]
            pieces.append(Piece(name, entry["dtype"], shape, Copy(header.path, begin, end)))
    pieces = _in_manifest_order(config, pieces, spec.name, where)
    return PrunePlan(selection, num_experts, config, pieces)


def _in_manifest_order(config: dict, pieces: list[Piece], name: str, where: str) -> list[Piece]:
    """Check the pieces against the spec the new config derives to; return them in its manifest order."""
    names = {p.name for p in pieces}
    pruned = derive_spec(config, f"{name}-pruned"[:64], tensor_names=names, where=f"{where} (pruned)")
    expected = build_manifest(pruned).expected()
    planned = {p.name: p for p in pieces}
    missing = [n for n in expected if n not in planned]
    unexpected = [n for n in planned if n not in expected]
    wrong = [n for n, (shape, dtype) in expected.items() if n in planned and (list(planned[n].shape), planned[n].dtype) != (shape, dtype)]  # fmt: skip
    for label, items in (("missing", missing), ("unexpected", unexpected), ("wrong shape or dtype", wrong)):
        if items:
            raise InputError(
                f"{where}: the pruned checkpoint would not match its own config: {len(items)} {label} "
                f"(first {items[0]!r}); does the source pass `integrate inspect`?"
            )
    return [planned[n] for n in expected]


def write_pruned(
    ckpt: Checkpoint,
    plan: PrunePlan,
    dst: Path,
    num_shards: int | None = None,
    overwrite: bool = False,
    progress: Callable[[int], None] | None = None,
) -> dict:
    """Write the pruned checkpoint into a sibling staging folder and rename it to dst."""
    if dst.exists() and not dst.is_dir():
        raise InputError(f"{dst}: exists and is not a folder")
    if dst.resolve() == ckpt.root.resolve():
        raise InputError(f"{dst}: is the source folder; write the pruned checkpoint somewhere else")
    if dst.is_dir() and any(dst.iterdir()) and not overwrite:
        raise InputError(f"{dst}: exists and is not empty (pass --overwrite to replace it)")
    count = num_shards or max(1, math.ceil(plan.nbytes / SHARD_BYTES))
    by_name = {p.name: p for p in plan.pieces}
    shards = plan_shards([p.as_tensor() for p in plan.pieces], count)
    with staged_folder(dst) as staging:
        weight_map: dict[str, str] = {}
        for i, shard in enumerate(shards):
            file = shard_name(i, len(shards))
            write_stream(staging / file, [by_name[t.name] for t in shard], {"format": "pt"}, progress)
            weight_map.update((t.name, file) for t in shard)
        index = {"metadata": {"total_size": plan.nbytes}, "weight_map": weight_map}
        (staging / INDEX_NAME).write_text(json.dumps(index, indent=2) + "\n")
        (staging / "config.json").write_text(json.dumps(plan.config, indent=2) + "\n")
        copied = copy_side_files(ckpt.root, staging)
    return {"shards": len(shards), "tensors": len(plan.pieces), "bytes": plan.nbytes, "copied": copied}
