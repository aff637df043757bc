"""JSON from outside (config.json, an index, safetensors headers, --tokens files, reports): parsed into plain data or
refused with one line naming the file, whatever its depth or the size of its numbers.

json.loads alone raises RecursionError on deep nesting (a 200k-level header) and ValueError past 4300 digits, and
accepts NaN, Infinity and 1e999 (inf). Here all of that is an InputError, and every value is checked to nest at most
MAX_DEPTH levels and to hold only finite floats and integers that fit in an int64 (a 400-digit token id escaped as an
OverflowError before). The happy path costs json.loads plus one pass over the containers with C-speed type sets;
a document with few brackets cannot be deep, so its depth is not walked at all.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

from dayone.core.errors import InputError

MAX_DEPTH = 64
INT_LIMIT = 1 << 63  # ints are sizes, offsets, token ids: any real one fits in an int64 (torch's index type)
_PLAIN = {str, bool, type(None)}


class _Constant(ValueError):
    pass


def _refuse_constant(name: str):
    raise _Constant(name)


def loads(data: str | bytes, where: str, *, values_checked: bool = False) -> Any:
    """Parse untrusted JSON. `values_checked`: the caller checks the type and range of every value itself (the
    safetensors header check does, in one tight pass), so only what json.loads cannot survive is refused here."""
    try:
        value = json.loads(data, parse_constant=_refuse_constant)
    except RecursionError:
        raise InputError(f"{where}: JSON nested too deeply (more than {MAX_DEPTH} levels)") from None
    except json.JSONDecodeError as err:
        raise InputError(f"{where}: not valid JSON ({err.msg} at line {err.lineno} column {err.colno})") from None
    except UnicodeDecodeError:
        raise InputError(f"{where}: not valid JSON (not UTF-8 text)") from None
    except _Constant as err:
        raise InputError(f"{where}: {err} is not a JSON number") from None
    except ValueError:  # Python refuses to convert an integer of more than 4300 digits
        raise InputError(f"{where}: a number has too many digits") from None
    if not values_checked:
        _check_values(value, where, deep=_brackets(data) > MAX_DEPTH)
    return value


def read(path: Path, what: str | None = None, max_bytes: int | None = None) -> Any:
    """The JSON document in the file at path; `what` names it in messages (default: the path). With max_bytes, a
    larger file is refused from its size before any of it is read (a 200 MB config.json took 23 s and 1.2 GB)."""
    try:
        with open(path, "rb") as f:
            if max_bytes is not None and os.fstat(f.fileno()).st_size > max_bytes:
                raise InputError(f"{what or path}: larger than {_size(max_bytes)}; refused unread")
            data = f.read() if max_bytes is None else f.read(max_bytes + 1)
    except OSError as err:
        raise InputError(f"{what or path}: cannot read: {err.strerror or err}") from None
    if max_bytes is not None and len(data) > max_bytes:  # a file that grew, or a pipe that reports no size
        raise InputError(f"{what or path}: larger than {_size(max_bytes)}; refused")
    return loads(data, what or str(path))


def _size(n: int) -> str:
    return f"{n >> 20} MiB" if n >= 1 << 20 else f"{n >> 10} KiB" if n >= 1 << 10 else f"{n} bytes"


def _brackets(data: str | bytes) -> int:
    if isinstance(data, bytes):
        return data.count(b"[") + data.count(b"{")
    return data.count("[") + data.count("{")


def check_values(value: Any, where: str) -> None:
    """The checks of `loads` on data parsed elsewhere (a part of a document parsed with values_checked)."""
    _check_values(value, where, deep=True)


def _check_values(root: Any, where: str, deep: bool) -> None:
    """Depth (when the text could be deep), then numbers: ints within INT_LIMIT, floats finite."""
    stack = [(root, 1)]
    while stack:
        node, depth = stack.pop()
        if deep and depth > MAX_DEPTH:
            raise InputError(f"{where}: JSON nested too deeply (more than {MAX_DEPTH} levels)")
        values = node.values() if type(node) is dict else node if type(node) is list else (node,)
        kinds = set(map(type, values))
        if kinds <= _PLAIN:
            continue
        if int in kinds and any(type(v) is int and not -INT_LIMIT < v < INT_LIMIT for v in values):
            raise InputError(f"{where}: an integer is too large (beyond int64)")
        if float in kinds and not all(math.isfinite(v) for v in values if type(v) is float):
            raise InputError(f"{where}: a number is not finite (NaN, Infinity or beyond float range)")
        if dict in kinds or list in kinds:
            stack.extend((v, depth + 1) for v in values if type(v) is dict or type(v) is list)
