"""Every shard header of a checkpoint read, checked and compared with the manifest, in parallel worker processes.

A K3 release has 497k tensors in 96 shards; parsing their header JSON is most of what `integrate inspect` does. So
the workers are forked as soon as the shard files are known and start parsing while the parent is still importing,
deriving the spec and building the manifest; the parent then sends them its EntryTable (small: expert groups are
expanded in the workers, on first use) and they send back one ShardComparison per shard: counts, bytes per dtype,
and only the names that are off.

Per shard, the fast path (`parse_shard`, then `ParsedShard.compare`) proves the header exactly as expected with a
handful of C-level passes over all its entries at once, Python never looping per entry: every name expected, its
(shape, dtype, byte count) equal to the manifest's, the offsets tiling the data region. A header it cannot prove
(anything unexpected, malformed or unusual) goes through the entry-by-entry check (`read_header`, which parses with
dayone.untrusted_json, and `compare_entries`), which names what is wrong; so the fast path needs to be sound only when
it says yes. What remains is json.loads itself (see benchmarks/cli.py).
"""

from __future__ import annotations

import gc
import json
import multiprocessing
import os
from dataclasses import dataclass, field
from itertools import chain, compress
from operator import itemgetter, sub
from pathlib import Path
from typing import TYPE_CHECKING, Self

from dayone import untrusted_json
from dayone.checkpoint.safetensors_header import read_header, read_header_bytes
from dayone.errors import InputError

if TYPE_CHECKING:
    from dayone.spec.manifest import EntryTable


@dataclass
class ShardComparison:
    """One shard against the manifest: what a worker sends back (small unless the shard is badly off)."""

    file: str
    tensors: int
    bytes_by_dtype: dict[str, int]
    seen: int = 0  # entries the manifest expects
    unexpected: list[str] = field(default_factory=list)
    wrong_shape: dict[tuple, list[str]] = field(default_factory=dict)
    wrong_dtype: dict[tuple, list[str]] = field(default_factory=dict)


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

    def compare(self, expected: EntryTable) -> ShardComparison | None:
        """A ShardComparison when every entry is what the manifest expects, else None (run the full check)."""
        if self.found != expected.lookup(self.names):
            return None
        return ShardComparison(self.file, len(self.names), self.bytes_by_dtype, seen=len(self.names))


def _refuse(token: str):
    raise ValueError(f"non-integer number {token}")  # no header field is a float: the full check names it


def parse_shard(path: Path, file: str) -> ParsedShard | None:
    """One header parsed and its offsets checked in bulk; None when anything is unusual (the full check decides).

    Equality with the manifest's (shape list, dtype, byte count) later stands in for the per-entry type checks,
    once floats (refused while parsing) and booleans (True == 1 in Python) are ruled out.
    """
    try:
        raw, data_start, file_size = read_header_bytes(path)
    except InputError:
        return None
    try:
        header = json.loads(raw, parse_float=_refuse, parse_constant=_refuse)
    except (ValueError, RecursionError):
        return None
    if type(header) is not dict:
        return None
    try:
        untrusted_json.check_values(header.pop("__metadata__", None), str(path))
    except InputError:
        return None
    if not header:
        return None
    try:
        return _bulk_checks(file, header, file_size - data_start)
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


def scan_one(path: Path, file: str, expected: EntryTable, parsed: ParsedShard | None = None):
    """The ShardComparison of one shard, or the InputError that names what is wrong with it."""
    if parsed is None:
        parsed = parse_shard(path, file)
    result = parsed.compare(expected) if parsed is not None else None
    if result is not None:
        return result
    try:
        header = read_header(path)
    except InputError as err:
        return err
    return compare_entries(file, header.entries, header.bytes_by_dtype, expected)


class HeaderScan:
    """Worker processes reading a fixed list of shards from the moment they start; `results(expected)` hands them
    the manifest and returns one ShardComparison (or InputError) per shard, in order. Use as a context manager:
    leaving it stops any worker still running."""

    def __init__(self, jobs: list[tuple[Path, str]], workers: int | None = None) -> None:
        self.jobs = jobs
        self.delivered = False
        count = max(1, min(workers or os.cpu_count() or 1, len(jobs)))
        self.workers: list[tuple[multiprocessing.Process, object]] = []
        if count == 1:
            return  # parsed in this process when the manifest is known: nothing to overlap with
        context = multiprocessing.get_context("fork")
        # Contiguous runs of shards, not every n-th: a layer's experts straddle neighbouring shards, and each worker
        # expands the expert groups it meets (dayone.spec.manifest.EntryTable).
        self.parts = [jobs[len(jobs) * i // count : len(jobs) * (i + 1) // count] for i in range(count)]
        for part in self.parts:
            parent_end, child_end = context.Pipe()
            worker = context.Process(target=_work, args=(part, child_end), daemon=True)
            worker.start()
            child_end.close()
            self.workers.append((worker, parent_end))

    def results(self, expected: EntryTable) -> list:
        if not self.workers:
            return [scan_one(path, file, expected) for path, file in self.jobs]
        for _, conn in self.workers:
            conn.send(expected)
        results: list = []
        for jobs, (_, conn) in zip(self.parts, self.workers, strict=True):
            try:
                part = conn.recv()
            except EOFError:  # the worker died (killed, out of memory): its shards are read here instead
                part = [scan_one(path, file, expected) for path, file in jobs]
            if isinstance(part, BaseException):
                raise part
            results.extend(part)
        self.delivered = True
        return results

    def close(self) -> None:
        """Stop the workers: those that delivered exit on their own; any other is killed at once (the command is
        ending on bad input, or the index named other files), since its work is of no use any more."""
        for worker, conn in self.workers:
            conn.close()
            if not self.delivered:
                worker.kill()
            worker.join()
        self.workers = []

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _work(jobs: list[tuple[Path, str]], conn) -> None:
    """A worker: parse shards until the manifest arrives, then compare those parsed and the rest as they come."""
    gc.disable()  # ~250k header objects, none in reference cycles: collections would only rescan them
    try:
        expected = None
        parsed: list[tuple[Path, str, ParsedShard | None]] = []
        out = []
        for path, file in jobs:
            if expected is None and conn.poll():
                expected = conn.recv()
            if expected is None:
                parsed.append((path, file, parse_shard(path, file)))
            else:
                out.extend(scan_one(p, f, expected, s) for p, f, s in parsed)
                parsed = []
                out.append(scan_one(path, file, expected))
        if expected is None:
            expected = conn.recv()
        out.extend(scan_one(p, f, expected, s) for p, f, s in parsed)
        conn.send(out)
    except EOFError:
        pass  # the parent stopped before sending the manifest (bad input elsewhere)
    except BaseException as err:  # noqa: BLE001 - reported to the parent, which re-raises it
        try:
            conn.send(err)
        except Exception:  # noqa: BLE001 - an exception that does not pickle
            conn.send(RuntimeError(repr(err)))
    finally:
        conn.close()


def scan_folder_early(source: str | Path) -> HeaderScan:
    """A HeaderScan of the *.safetensors files directly in `source`, started before its index is even read, when
    it is a local folder (an empty one otherwise). scan_coverage uses it when the index names exactly these files and
    discards it otherwise; files that resolve outside the folder are left out (opening the checkpoint refuses them)."""
    from dayone.checkpoint.reader import safe_member

    root = Path(source)
    jobs = []
    if root.is_dir():
        for path in sorted(root.glob("*.safetensors")):
            try:
                safe_member(root, path.name, str(root))
            except InputError:
                continue
            jobs.append((root / path.name, path.name))
    return HeaderScan(jobs)
