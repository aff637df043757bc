"""YAML from outside (spec files, conventions files): parsed into plain data or refused with one line naming the
file, before anything walks what it holds.

A YAML document can be far larger than its text: nested anchors and aliases ("billion laughs") or merge keys (<<)
that pull one mapping into another expand to millions of nodes, and a walk of the loaded data then never ends. So
the event stream is read first, in libyaml's C parser where PyYAML has it, and refused on the first alias or merge
key, past MAX_DEPTH levels of nesting or past MAX_NODES nodes; only then is it loaded, with the safe loader (no
Python objects), and its values checked as untrusted JSON's are (ints within int64, floats finite).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from dayone.core import untrusted_json
from dayone.core.errors import InputError

# libyaml's parser when PyYAML was built with it: the pure-Python one takes 40x longer on a K3 spec.
SafeLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
MAX_BYTES = 4 << 20  # the K3 spec is a few KiB; a spec of 4 MiB is not hand-written
MAX_DEPTH = untrusted_json.MAX_DEPTH
MAX_NODES = 200_000
_OPEN = (yaml.MappingStartEvent, yaml.SequenceStartEvent)
_CLOSE = (yaml.MappingEndEvent, yaml.SequenceEndEvent)
_NODE = (yaml.ScalarEvent, yaml.AliasEvent, *_OPEN)


def loads(text: str | bytes, where: str, max_bytes: int = MAX_BYTES) -> Any:
    """Parse untrusted YAML text; `where` names it in messages."""
    if len(text) > max_bytes:
        raise InputError(f"{where}: larger than {_size(max_bytes)}, not a file written by hand")
    try:
        if isinstance(text, bytes):
            text = text.decode("utf-8")
        _check_events(text, where)
        data = yaml.load(text, Loader=SafeLoader)
    except UnicodeDecodeError:
        raise InputError(f"{where}: not UTF-8 text") from None
    except RecursionError:
        raise InputError(f"{where}: nested too deeply (more than {MAX_DEPTH} levels)") from None
    except (yaml.YAMLError, ValueError) as err:
        raise InputError(f"{where}: not valid YAML: {_first_line(err)}") from None
    untrusted_json.check_values(data, where)
    return data


def read(path: Path, what: str | None = None, max_bytes: int = MAX_BYTES) -> Any:
    """The YAML document in the file at path, read no further than max_bytes + 1."""
    where = what or str(path)
    try:
        with open(path, "rb") as f:
            raw = f.read(max_bytes + 1)
    except OSError as err:
        raise InputError(f"{where}: cannot read: {err.strerror or err}") from None
    return loads(raw, where, max_bytes)


def _check_events(text: str, where: str) -> None:
    """Refuse aliases, merge keys, depth past MAX_DEPTH and more than MAX_NODES nodes, from the events alone.

    `expecting_key` has one entry per open container: for a mapping, whether its next node is a key (a merge key
    is a plain `<<` scalar in key position); for a sequence, None."""
    expecting_key: list[bool | None] = []
    nodes = 0
    for event in yaml.parse(text, Loader=SafeLoader):
        if isinstance(event, _CLOSE):
            expecting_key.pop()
            continue
        if not isinstance(event, _NODE):
            continue
        nodes += 1
        if nodes > MAX_NODES:
            raise InputError(f"{where}: more than {MAX_NODES} YAML nodes, not a file written by hand")
        top = expecting_key[-1] if expecting_key else None
        is_key = top is True
        if top is not None:  # in a mapping, keys and values take turns
            expecting_key[-1] = not top
        line = event.start_mark.line + 1 if event.start_mark else "?"
        if isinstance(event, yaml.AliasEvent):
            raise InputError(f"{where}: line {line}: YAML aliases (*{event.anchor}) are not allowed")
        if is_key and isinstance(event, yaml.ScalarEvent) and event.value == "<<" and event.implicit[0]:
            raise InputError(f"{where}: line {line}: YAML merge keys (<<) are not allowed")
        if isinstance(event, _OPEN):
            if len(expecting_key) >= MAX_DEPTH:
                raise InputError(f"{where}: line {line}: nested too deeply (more than {MAX_DEPTH} levels)")
            expecting_key.append(True if isinstance(event, yaml.MappingStartEvent) else None)


def _first_line(err: BaseException) -> str:
    lines = str(err).splitlines()
    return lines[0] if lines else type(err).__name__


def _size(n: int) -> str:
    return f"{n >> 20} MiB" if n >= 1 << 20 else f"{n >> 10} KiB"
