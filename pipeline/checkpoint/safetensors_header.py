"""Read and check a safetensors header without reading tensor data.

Layout: 8-byte little-endian header length N, N bytes of JSON {name: {dtype, shape, data_offsets: [begin, end]},
"__metadata__": {...}}, then the data region. A header is trusted only if its offsets tile the data region exactly:
no overlap, no gap, nothing past the end of the file, each extent matching shape x dtype size.
"""

from __future__ import annotations

import gc
import json
import math
import os
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import NamedTuple

from dayone.checkpoint.names import check_names
from dayone.core import untrusted_json
from dayone.core.errors import InputError
from dayone.spec.manifest import DTYPE_BYTES

# safetensors itself refuses headers over 100 MB; a larger length is a corrupt or hostile file.
MAX_HEADER_BYTES = 100 * 1024 * 1024


class TensorInfo(NamedTuple):
    """Where one tensor's bytes are. A tuple, not a dataclass: a K3 release has ~500k of them."""

    dtype: str
    shape: tuple[int, ...]
    begin: int  # offset of the first byte in the file (header included)
    end: int
    file: str  # the shard's file name, relative to the checkpoint folder


@dataclass
class ShardHeader:
    """One checked shard header. `entries` is the header JSON as parsed (name -> {dtype, shape, data_offsets});
    TensorInfo objects are made only when asked for, since inspection of a 500k-tensor release never needs them."""

    path: Path
    entries: dict[str, dict]
    metadata: dict[str, str]
    data_start: int
    file_size: int
    bytes_by_dtype: dict[str, int]

    @cached_property
    def tensors(self) -> dict[str, TensorInfo]:
        start, file = self.data_start, self.path.name
        return {
            name: TensorInfo(
                e["dtype"], tuple(e["shape"]), start + e["data_offsets"][0], start + e["data_offsets"][1], file
            )
            for name, e in self.entries.items()
        }


@contextmanager
def gc_paused():
    """Pause the cyclic GC: building ~500k header objects otherwise triggers full collections that scan them all
    again and again (3x the parse time on a K3 release). Nothing allocated here forms reference cycles."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def read_header_bytes(path: Path) -> tuple[bytes, int, int]:
    """(header JSON bytes, offset of the data region, file size), with the length prefix checked against the file."""
    try:
        with open(path, "rb") as f:
            file_size = os.fstat(f.fileno()).st_size
            prefix = f.read(8)
            if len(prefix) < 8:
                raise InputError(f"{path}: truncated: {file_size} bytes, too short for a safetensors header")
            length = int.from_bytes(prefix, "little")
            if length > MAX_HEADER_BYTES:
                raise InputError(f"{path}: header length {length} exceeds the {MAX_HEADER_BYTES}-byte limit")
            if 8 + length > file_size:
                raise InputError(
                    f"{path}: truncated: header says {length} bytes, file has {file_size - 8} after the length"
                )
            raw = f.read(length)
    except OSError as err:
        raise InputError(f"{path}: cannot read: {err.strerror or err}") from None
    return raw, 8 + length, file_size


def check_metadata(metadata: object, path: Path) -> dict[str, str]:
    """__metadata__ as the format defines it, and as the safetensors library that loads the tensors insists on:
    strings to strings (a nested object passed every check here and then failed in safe_open)."""
    if metadata is None:
        return {}
    if type(metadata) is not dict or not all(type(k) is str and type(v) is str for k, v in metadata.items()):
        raise InputError(f"{path}: header __metadata__ must map strings to strings")
    return metadata


def read_header(path: Path) -> ShardHeader:
    """Parse and check one .safetensors header; InputError with the file name on anything wrong."""
    raw, data_start, file_size = read_header_bytes(path)
    # Every entry's values are checked below; only what json.loads itself cannot survive is refused here.
    header = untrusted_json.loads(raw, f"{path}: header", values_checked=True)
    if not isinstance(header, dict):
        raise InputError(f"{path}: header is not a JSON object")
    metadata = check_metadata(header.pop("__metadata__", None), path)
    if has_duplicates(raw, header):
        _name_duplicate(raw, path)
    check_names(header, f"{path}: header")
    by_dtype = _check_entries(path, header, data_start, file_size)
    return ShardHeader(path, header, metadata, data_start, file_size, by_dtype)


def has_duplicates(raw: bytes, entries: dict) -> bool:
    """Whether the header text holds a key twice (json.loads keeps the last silently). Every entry has one
    "data_offsets" key, and the quoted word cannot occur inside a name or a metadata string (its quotes would be
    escaped there): more occurrences than entries is a repeated tensor name or a repeated key in an entry. That is
    one C-speed count; only a header with backslash-u escapes (which could spell a key another way, and which no
    common writer emits for ASCII names) is parsed again keeping every key."""
    if raw.count(b'"data_offsets"') > len(entries):
        return True
    return b"\\u" in raw and _repeated_key(raw) is not None


def _name_duplicate(raw: bytes, path: Path) -> None:
    key = _repeated_key(raw)
    if key is not None:
        raise InputError(f"{path}: header names {key!r} twice (the format allows each name once)")


class _Repeated(Exception):
    pass


def _repeated_key(raw: bytes) -> str | None:
    """The first key given twice in one object of the header, or None."""

    def refuse_repeats(pairs: list[tuple[str, object]]) -> dict:
        keys = [key for key, _ in pairs]
        if len(set(keys)) != len(keys):
            seen: set[str] = set()
            raise _Repeated(next(k for k in keys if k in seen or seen.add(k)))
        return dict(pairs)

    try:
        json.loads(raw, object_pairs_hook=refuse_repeats)
    except _Repeated as repeated:
        return repeated.args[0]
    return None


def _check_entries(path: Path, header: dict, data_start: int, file_size: int) -> dict[str, int]:
    """Check every entry; return the data bytes per dtype. One tight pass: a K3 release has ~500k entries."""
    by_dtype: dict[str, int] = {}
    extents: list[tuple[int, int, str]] = []
    sizes = DTYPE_BYTES
    for name, entry in header.items():
        try:
            dtype, shape, (begin, end) = entry["dtype"], entry["shape"], entry["data_offsets"]
            width = sizes[dtype]
            numel = math.prod(shape)
        except KeyError as err:
            if isinstance(entry, dict) and "dtype" in entry and err.args[0] == entry["dtype"]:
                raise InputError(f"{path}: tensor {name!r}: unknown dtype {entry['dtype']!r}") from None
            raise InputError(f"{path}: tensor {name!r}: malformed header entry") from None
        except (TypeError, ValueError, OverflowError):  # OverflowError: math.prod([2**63, ""]) repeats a string
            raise InputError(f"{path}: tensor {name!r}: malformed header entry") from None
        if type(shape) is not list or type(numel) is not int or (shape and min(shape) < 0):
            raise InputError(f"{path}: tensor {name!r}: malformed shape {shape!r}")
        if type(begin) is not int or type(end) is not int or not 0 <= begin <= end:
            raise InputError(f"{path}: tensor {name!r}: malformed data_offsets {[begin, end]!r}")
        if end - begin != numel * width:
            raise InputError(
                f"{path}: tensor {name!r}: data_offsets span {end - begin} bytes, {dtype}{shape} needs {numel * width}"
            )
        by_dtype[dtype] = by_dtype.get(dtype, 0) + end - begin
        extents.append((begin, end, name))
    extents.sort()
    cursor, previous = 0, None
    for begin, end, name in extents:
        if begin != cursor:
            if begin < cursor:
                raise InputError(f"{path}: tensor {name!r} overlaps {previous!r} (offset {begin} < {cursor})")
            raise InputError(f"{path}: gap of {begin - cursor} bytes before tensor {name!r} at offset {cursor}")
        cursor, previous = end, name
    data_size = file_size - data_start
    if cursor > data_size:
        raise InputError(
            f"{path}: truncated: tensors need {cursor} data bytes, file holds {data_size}"
            + (f" (last tensor {previous!r})" if previous else "")
        )
    if cursor < data_size:
        raise InputError(f"{path}: {data_size - cursor} bytes after the last tensor are not described by the header")
    return by_dtype
