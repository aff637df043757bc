"""The shard index read once, per file: the names it lists there, sorted. What the scan compares each shard with.

A K3 index maps 497k names in 60 MB; transformers writes it with its keys sorted, so a shard's names are spread over
it and no worker can check its own shard's part in place. One process (alongside the header workers) reads it once:
one regex match checks that the whole weight_map body is plain "name": "file" pairs, a second extracts the pairs a
chunk at a time, and each file's names are sorted and joined one a line (0.33 s CPU for the K3 index). The scan
then needs only a bytes comparison per shard. Anything unusual (escapes, another shape of JSON) gives None, and the
scan leaves the verdict to the plain reader.
"""

from __future__ import annotations

import json
import mmap
import re
from itertools import chain, islice
from operator import itemgetter, lt
from pathlib import Path
from typing import NamedTuple


class Listing(NamedTuple):
    """The weight_map parsed once, what the parent compares each shard's names with."""

    texts: dict[str, bytes]  # file -> the names listed for it, sorted, one a line (UTF-8)
    keys_distinct: bool  # no name listed twice


def read_listing(path: Path) -> Listing | None:
    """Per file, the names the index at `path` lists for it, sorted, one a line; None where its weight_map is not plain
    "name": "file" pairs (the plain reader parses it).

    Read in chunks of pairs (cut between a value's closing quote and the next key's opening one, which no name can
    hold), so that only one chunk's pairs are objects at a time, then one file's names at a time joined."""
    try:
        with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as text:
            return _listing(text)
    except (OSError, ValueError):  # unreadable or empty: the plain reader says why
        return None


def _listing(text: mmap.mmap) -> Listing | None:
    body = _weight_map_body(text)
    if body is None or _PAIRS.fullmatch(text, *body) is None:
        return None
    first, end = body
    listed: dict[bytes, list[bytes]] = {}
    ascending, previous, count = True, b"", 0
    at = first
    while at < end:
        cut = _BETWEEN_PAIRS.search(text, min(at + _CHUNK, end), end)
        stop = cut.start() + 1 if cut is not None else end
        pairs = _PAIR.findall(text, at, stop)
        names = list(map(itemgetter(0), pairs))
        ascending = ascending and previous < names[0] and all(map(lt, names, islice(names, 1, None)))
        previous, count = names[-1], count + len(names)
        for name, file in pairs:
            listed.setdefault(file, []).append(name)
        at = cut.end() - 1 if cut is not None else end
    # Strictly ascending (transformers sorts the keys): no name twice; any other order: counted.
    distinct = ascending or len(set(chain.from_iterable(listed.values()))) == count
    texts: dict[str, bytes] = {}
    for file in list(listed):
        names = listed.pop(file)
        joined = b"\n".join(sorted(names))
        if joined.count(b"\n") != len(names) - 1:  # a raw newline in a name (not JSON) would pass for two names
            return None
        try:
            texts[file.decode()] = joined
        except UnicodeDecodeError:
            return None
    return Listing(texts, distinct)


# No backslash in the body (checked), so a quote always delimits a string; possessive: no backtracking on 60 MB.
_WS = "[ \t\n\r]"
_PAIRS = re.compile(rf'"[^"]*+"{_WS}*+:{_WS}*+"[^"]*+"(?:{_WS}*+,{_WS}*+"[^"]*+"{_WS}*+:{_WS}*+"[^"]*+")*+'.encode())
_PAIR = re.compile(rf'"([^"]*+)"{_WS}*+:{_WS}*+"([^"]*+)"'.encode())
_BETWEEN_PAIRS = re.compile(rb'"[ \t\n\r]*+,[ \t\n\r]*+"')  # a value's closing quote, comma, the next key's opening one
_CHUNK = 1 << 22  # bytes of the index whose pairs are objects at once


def _weight_map_body(text: mmap.mmap) -> tuple[int, int] | None:
    """[first key's quote, one past the last value's quote) of the weight_map, when it is the index's last member,
    its key the top-level one, and its body holds no backslash; None otherwise."""
    key = text.find(b'"weight_map"')
    open_brace = text.find(b"{", key) if key >= 0 else -1
    close_brace = text.find(b"}", open_brace) if open_brace >= 0 else -1
    if close_brace < 0 or text.find(b"\\", open_brace, close_brace) >= 0:
        return None  # escapes: a quote need not end a string
    first = text.find(b'"', open_brace, close_brace)
    last = text.rfind(b'"', open_brace, close_brace) + 1
    if first < 0 or text[open_brace + 1 : first].strip() or text[last:close_brace].strip():
        return None
    if text[close_brace + 1 :].strip() != b"}" or not _opens_weight_map(text[:key]):
        return None
    return first, last


def _opens_weight_map(head: bytes) -> bool:
    """Whether `head` + the weight_map is a JSON object whose last member is that weight_map: the head (metadata,
    a few bytes) is parsed with the weight_map's value replaced by 0, so a "weight_map" inside a string fails."""
    try:
        top = json.loads(head + b'"weight_map": 0}')
    except (ValueError, RecursionError):
        return False
    return type(top) is dict and top.get("weight_map") == 0
