"""Every shard header of a checkpoint read, checked and compared with the manifest, in parallel worker processes.

A K3 release has 497k tensors in 96 shards; reading their headers is most of what `integrate inspect` does. The
workers are forked once the manifest's EntryTable exists (small: expert groups are expanded in the workers, on first
use) and send back one ShardComparison per shard: counts, bytes per dtype, and only the names that are off. (Forking
them earlier, to parse while the parent derives the spec, was measured: holding parsed headers until the table came
cost more CPU than the overlap saved.)

Per shard, a header written as compact JSON with its data laid out in header order (dayone's writer in manifest order,
the safetensors library in its own: by dtype alignment, then name) is first proven byte for byte against the text the
manifest predicts (dayone.checkpoint.header_proof), no JSON parsed but __metadata__. Otherwise the fast path
(`parse_shard`, then `ParsedShard.compare`) proves the header exactly as expected with a
handful of C-level passes over all its entries at once, Python never looping per entry: every name expected, its
(shape, dtype, byte count) equal to the manifest's, the offsets tiling the data region. A shard whose names follow
the manifest's order is matched as runs of the manifest's own sequence
(EntryTable.run: a run of expert names is one string comparison, no name built or hashed per tensor); any other
order looks each name up (EntryTable.lookup), expanding the expert groups it meets. A header it cannot prove
(anything unexpected, malformed or unusual) goes through the entry-by-entry check (`read_header`, which parses with
dayone.core.untrusted_json, and `compare_entries`), which names what is wrong; so the fast paths need to be sound only
when they say yes. benchmarks/cli.py --breakdown measures each against json.loads.

Each proven shard also says where it begins in the manifest (`first_at`) and where the index lists its names
(dayone.checkpoint.index_text): what dayone.checkpoint.coverage needs to prove that no tensor is held twice or
elsewhere than the index says.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from itertools import chain, compress
from operator import itemgetter, sub
from pathlib import Path
from typing import TYPE_CHECKING

from dayone.checkpoint.forked import Forked
from dayone.checkpoint.header_proof import RunChain, ShardComparison, index_listing, prove_header
from dayone.checkpoint.header_text import refuse_float
from dayone.checkpoint.index_text import IndexText
from dayone.checkpoint.safetensors_header import check_metadata, has_duplicates, read_header, read_header_bytes
from dayone.core.errors import InputError

if TYPE_CHECKING:
    from dayone.spec.manifest import EntryTable


def compare_entries(file: str, entries: dict, bytes_by_dtype: dict[str, int], expected: EntryTable) -> ShardComparison:
    result = ShardComparison(file, len(entries), bytes_by_dtype)
    seen = 0
    for name, entry in entries.items():
        want = expected.get(name)
        if want is None:
            result.unexpected.append(name)
            continue
        seen += 1
        shape, dtype = want[0], want[1]
        if entry["shape"] != shape:
            result.wrong_shape.setdefault((tuple(shape), tuple(entry["shape"])), []).append(name)
        elif entry["dtype"] != dtype:
            result.wrong_dtype.setdefault((dtype, entry["dtype"]), []).append(name)
    result.seen = seen
    return result


_SHAPE, _DTYPE, _OFFSETS = itemgetter("shape"), itemgetter("dtype"), itemgetter("data_offsets")
_BEGIN, _END = itemgetter(0), itemgetter(1)


@dataclass
class ParsedShard:
    """What the fast path keeps of one header until the manifest arrives: names and (shape, dtype, bytes) in
    header order; the tiling of the data region is already checked."""

    file: str
    names: list[str]
    found: list[tuple]
    bytes_by_dtype: dict[str, int]

    def compare(self, expected: EntryTable, index: IndexText | None = None) -> ShardComparison | None:
        """A ShardComparison when every entry is what the manifest expects, else None (run the full check).

        A shard in manifest order is compared as one run (no name hashed); any other order name by name."""
        in_order = expected.run(self.names)
        if in_order is not None and self.found == in_order:
            first_at = expected.position(self.names[0])
        elif self.found == expected.lookup(self.names):
            first_at = None
        else:
            return None
        listing = index_listing(self.names, self.file, index)
        return ShardComparison(
            self.file, len(self.names), self.bytes_by_dtype, seen=len(self.names), first_at=first_at, **listing
        )


def parse_shard(path: Path, file: str) -> ParsedShard | None:
    """One header parsed and its offsets checked in bulk; None when anything is unusual (the full check decides).

    Equality with the manifest's (shape list, dtype, byte count) later stands in for the per-entry type checks,
    once floats (refused while parsing) and booleans (True == 1 in Python) are ruled out.
    """
    try:
        raw, data_start, file_size = read_header_bytes(path)
    except InputError:
        return None
    return parse_header_bytes(raw, file_size - data_start, path, file)


def parse_header_bytes(raw: bytes, data_size: int, path: Path, file: str) -> ParsedShard | None:
    """parse_shard of a header already read (scan_one has it from the byte proof: the file is not read again)."""
    try:
        header = json.loads(raw, parse_float=refuse_float, parse_constant=refuse_float)
    except (ValueError, RecursionError):
        return None
    if type(header) is not dict:
        return None
    try:
        check_metadata(header.pop("__metadata__", None), path)
    except InputError:
        return None
    if not header or has_duplicates(raw, header):  # a name given twice: the full check names it
        return None
    try:
        return _bulk_checks(file, header, data_size)
    except (KeyError, TypeError, IndexError, ValueError):  # a value of the wrong type somewhere: not for us to name
        return None


def _bulk_checks(file: str, header: dict, data_size: int) -> ParsedShard | None:
    entries = header.values()
    offsets = list(map(_OFFSETS, entries))
    sizes = list(map(sub, map(_END, offsets), map(_BEGIN, offsets)))
    dtypes = list(map(_DTYPE, entries))
    found = list(zip(map(_SHAPE, entries), dtypes, sizes))
    flat = list(chain.from_iterable(offsets))
    if len(flat) != 2 * len(offsets) or min(sizes) < 0:
        return None
    if not _tiles(flat, data_size):  # in header order, which writers usually follow; else in offset order
        flat = list(chain.from_iterable(sorted(offsets)))
        if not _tiles(flat, data_size):
            return None
    # Tiled offsets ascend from 0: a boolean (== 0 or 1) can only be among the first few.
    for offset in flat:
        if offset > 1:
            break
        if type(offset) is not int:
            return None
    if bool in set(map(type, chain.from_iterable(map(itemgetter(0), found)))):
        return None
    kinds = sorted(set(dtypes))  # TypeError for a list or a mix of types: the full check names it
    if set(map(type, kinds)) != {str}:
        return None
    by_dtype = {d: sum(compress(sizes, map(d.__eq__, dtypes))) for d in kinds[:-1]}
    by_dtype[kinds[-1]] = data_size - sum(by_dtype.values())  # the extents tile the data region
    return ParsedShard(file, list(header), found, by_dtype)


def _tiles(flat: list[int], data_size: int) -> bool:
    """[begin0, end0, begin1, end1, ...] (no extent negative) covers 0..data_size with no gap and no overlap."""
    return flat[0] == 0 and flat[-1] == data_size and flat[1:-1:2] == flat[2::2]


def scan_one(
    path: Path, file: str, expected: EntryTable, index: IndexText | None = None, chain: RunChain | None = None
) -> ShardComparison | InputError:
    """The ShardComparison of one shard, or the InputError that names what is wrong with it; `index` (a sharded
    checkpoint's) places the names of a shard the fast paths prove; `chain`, the run the worker's previous shard held.
    """
    try:
        raw, data_start, file_size = read_header_bytes(path)
    except InputError as err:
        return err
    data_size = file_size - data_start
    result = prove_header(raw, data_size, path, file, expected, index, chain)
    if result is not None:
        return result
    parsed = parse_header_bytes(raw, data_size, path, file)
    result = parsed.compare(expected, index) if parsed is not None else None
    if result is not None:
        return result
    try:
        header = read_header(path)
    except InputError as err:
        return err
    return compare_entries(file, header.entries, header.bytes_by_dtype, expected)


def scan_shards(
    jobs: list[tuple[Path, str]],
    expected: EntryTable,
    workers: int | None = None,
    index_path: Path | None = None,
    placing: bool = True,
) -> list:
    """scan_one for every (path, file name), in order, in `workers` forked processes (default: one per core).

    Each worker takes a contiguous run of shards, not every n-th: a layer's experts straddle neighbouring shards,
    and each worker expands the expert groups it meets. The table is inherited through fork, not sent; a worker
    sends back its comparisons through a pipe (small unless a shard is badly off, or its names are sent for the
    index check). Each process maps the index at `index_path` (a sharded checkpoint's) itself, to place its shards'
    names in it (unless `placing` is False: the index is known to be in another order); none parses it.
    """
    count = max(1, min(workers or os.cpu_count() or 1, len(jobs)))
    if count == 1:
        return _scan_part(jobs, expected, index_path, placing)
    parts = [jobs[len(jobs) * i // count : len(jobs) * (i + 1) // count] for i in range(count)]
    running: list[Forked] = []
    try:
        for part in parts:
            running.append(Forked(_scan_part, part, expected, index_path, placing))
        return [result for worker in running for result in worker.result()]
    finally:
        for worker in running:
            worker.close()


def _scan_part(jobs: list[tuple[Path, str]], expected: EntryTable, index_path: Path | None, placing: bool) -> list:
    index = IndexText(index_path, placing) if index_path is not None else None
    try:
        chain = RunChain()
        return [scan_one(path, file, expected, index, chain) for path, file in jobs]
    finally:
        if index is not None:
            index.close()
