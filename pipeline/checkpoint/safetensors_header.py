"""Read and check a safetensors header without reading tensor data.

Layout: 8-byte little-endian header length N, N bytes of JSON {name: {dtype, shape, data_offsets: [begin, end]},
"__metadata__": {...}}, then the data region. A header is trusted only if its offsets tile the data region exactly:
no overlap, no gap, nothing past the end of the file, each extent matching shape x dtype size.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from dayone.errors import InputError
from dayone.spec.manifest import DTYPE_BYTES

# safetensors itself refuses headers over 100 MB; a larger length is a corrupt or hostile file.
MAX_HEADER_BYTES = 100 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class TensorInfo:
    dtype: str
    shape: tuple[int, ...]
    begin: int  # offset of the first byte in the file (header included)
    end: int


@dataclass(frozen=True)
class ShardHeader:
    path: Path
    tensors: dict[str, TensorInfo]
    metadata: dict[str, str]
    data_start: int
    file_size: int


def read_header(path: Path) -> ShardHeader:
    """Parse and check one .safetensors header; InputError with the file name on anything wrong."""
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
    try:
        header = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise InputError(f"{path}: header is not valid JSON ({err})") from None
    if not isinstance(header, dict):
        raise InputError(f"{path}: header is not a JSON object")
    metadata = header.pop("__metadata__", None) or {}
    data_start = 8 + length
    return ShardHeader(path, _check_entries(path, header, data_start, file_size), metadata, data_start, file_size)


def _check_entries(path: Path, header: dict, data_start: int, file_size: int) -> dict[str, TensorInfo]:
    tensors: dict[str, TensorInfo] = {}
    extents: list[tuple[int, int, str]] = []
    for name, entry in header.items():
        try:
            dtype, shape, (begin, end) = entry["dtype"], entry["shape"], entry["data_offsets"]
        except (TypeError, KeyError, ValueError):
            raise InputError(f"{path}: tensor {name!r}: malformed header entry") from None
        if dtype not in DTYPE_BYTES:
            raise InputError(f"{path}: tensor {name!r}: unknown dtype {dtype!r}")
        if not (isinstance(shape, list) and all(isinstance(d, int) and d >= 0 for d in shape)):
            raise InputError(f"{path}: tensor {name!r}: malformed shape {shape!r}")
        if not (isinstance(begin, int) and isinstance(end, int) and 0 <= begin <= end):
            raise InputError(f"{path}: tensor {name!r}: malformed data_offsets {[begin, end]!r}")
        numel = 1
        for d in shape:
            numel *= d
        if end - begin != numel * DTYPE_BYTES[dtype]:
            raise InputError(
                f"{path}: tensor {name!r}: data_offsets span {end - begin} bytes, "
                f"{dtype}{shape} needs {numel * DTYPE_BYTES[dtype]}"
            )
        tensors[name] = TensorInfo(dtype, tuple(shape), data_start + begin, data_start + end)
        extents.append((begin, end, name))
    extents.sort()
    cursor, previous = 0, None
    for begin, end, name in extents:
        if begin < cursor:
            raise InputError(f"{path}: tensor {name!r} overlaps {previous!r} (offset {begin} < {cursor})")
        if begin > cursor:
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
    return tensors
