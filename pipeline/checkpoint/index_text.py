"""Proof, without parsing it, that the shard index assigns each shard exactly the names its header holds.

A K3 index maps 497k names in 60 MB; parsing it (or even extracting its names with a regex) costs about half the
header-parse floor. Writers that list each shard's tensors together, in header order (dayone's writer, the K3
skeleton), give an index whose weight_map body is the shards' fragments `"name": "file"` joined by one separator, in
file order. A worker generates the fragment of each shard it has proven from the header's names and finds it in the
index (mapped, not read: only the pages compared are touched); the parent then checks that the fragments tile the
body from its first key to its last value (`tiles`). Tiling is exact: every pair of the index is one of a fragment's,
each fragment holds exactly its shard's names, so the index says what the headers hold, no more and no less.
Where a shard's fragment is not found (an index in another order: transformers writes it sorted by name; or headers
in another order than the index's), no worker parses the index: the worker sends the shard's names, sorted, and the
index is read once for the parent (`names_by_file`: one regex match checks the whole body, a second extracts the
pairs a chunk at a time, each file's names sorted and joined; 0.33 s CPU for the K3 index, in a process alongside the
workers when its first name says it is in another order than the manifest's). Each shard's names must then be
exactly those listed for its file, and no name listed twice. Where neither holds (escapes, a mix),
dayone.checkpoint.coverage compares in full.
"""

from __future__ import annotations

import json
import mmap
import re
from itertools import chain, islice, pairwise
from operator import itemgetter, lt
from pathlib import Path
from typing import NamedTuple


class Frame(NamedTuple):
    """Where the weight_map's pairs lie in the index: first key's quote, one past the last value's, separators."""

    first: int
    end: int
    key_value: str  # between a key and its value, ': ' as json.dumps writes it
    between: str  # between one pair and the next, ',\n    ' with indent=2


class Placement(NamedTuple):
    """One shard's fragment in the index: [begin, end) bytes, and the frame it was found in."""

    begin: int
    end: int
    frame: Frame


class IndexCheck(NamedTuple):
    """What a worker found of one shard in the index: its fragment's place, or (when the index lists the shard's
    names elsewhere than in one run in header order) whether the parsed index assigns every one of them to this
    file and maps no name twice. None where it could not tell; the parent then compares in full."""

    placement: Placement | None
    agrees: bool | None = None
    keys_distinct: bool | None = None


class Listing(NamedTuple):
    """The weight_map parsed once, what the parent compares each shard's names with."""

    texts: dict[str, bytes]  # file -> the names listed for it, sorted, one a line (UTF-8)
    keys_distinct: bool  # no name listed twice


class IndexText:
    """One process's view of the index: mapped once, the frame found once, each shard's fragment placed."""

    def __init__(self, path: Path, placing: bool = True) -> None:
        """`placing` False: the index is known to list names in another order than any shard's (it is read once
        for the parent instead); it is not even mapped, and every check answers "not placed"."""
        self.map: mmap.mmap | None = None
        self.frame: Frame | None = None
        self.next_at = -1  # where the fragment after the last placed one would begin
        self.placing = placing  # until one shard is not where its fragment would be
        self.listed: dict[str, str] | None = None  # name -> file, parsed on first need
        self.keys_distinct: bool | None = None
        self.parsed = False
        if not placing:
            return
        try:
            with open(path, "rb") as f:
                self.map = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        except (OSError, ValueError):  # unreadable or empty: the full check says why
            return
        self.frame = _frame(self.map)

    def place(self, names: list[str], file: str, plain: bool = False) -> Placement | None:
        """Where the fragment of `names` (a shard's, in header order) assigned to `file` lies in the index. `plain`:
        the names are known to be printable with no quote or backslash (the manifest's, proven byte for byte)."""
        frame, text = self.frame, self.map
        if frame is None or text is None or not names:
            return None
        # Names and the file as JSON writes them unescaped: printable, no quote or backslash (else not ours to prove).
        checked = file if plain else "".join(names) + file
        if not checked.isprintable() or '"' in checked or "\\" in checked:
            return None
        value = f'"{file}"'
        joined = f'"{frame.key_value}{value}{frame.between}"'.join(names)
        fragment = f'"{joined}"{frame.key_value}{value}'.encode()
        begin = self.next_at
        if begin < 0 or text[begin : begin + len(fragment)] != fragment:
            # Found by its first pair, then compared whole: a search for the whole fragment costs far more.
            first_pair = f'"{names[0]}"{frame.key_value}{value}'.encode()
            begin = text.find(first_pair, frame.first, frame.end)
            if begin < 0 or text[begin : begin + len(fragment)] != fragment:
                return None
        end = begin + len(fragment)
        self.next_at = end + len(frame.between)
        return Placement(begin, end, frame)

    def check(self, names: list[str], file: str, plain: bool = False) -> IndexCheck:
        """One shard's names placed in the index as a fragment; IndexCheck(None) where they are not, and then the
        parent compares them with the index parsed once (`names_by_file`). Once a shard is not where its fragment
        would be, the index is in another order: this worker stops searching (each search scans up to 60 MB)."""
        placement = self.place(names, file, plain) if self.placing else None
        self.placing = placement is not None
        return IndexCheck(placement)

    def names_by_file(self) -> Listing | None:
        """The weight_map read once: per file, the names listed for it, sorted, one a line (UTF-8), and whether no
        name is listed twice; None when its body is not plain "name": "file" pairs (the full check parses it).

        Read in chunks of pairs (cut between a value's closing quote and the next key's opening one, which no name
        can hold), so that only one chunk's pairs are objects at a time, then one file's names at a time joined."""
        frame, text = self.frame, self.map
        if frame is None or text is None or _PAIRS_BYTES.fullmatch(text, frame.first, frame.end) is None:
            return None
        listed: dict[bytes, list[bytes]] = {}
        ascending, previous, count = True, b"", 0
        at = frame.first
        while at < frame.end:
            cut = _BETWEEN_PAIRS.search(text, min(at + _CHUNK, frame.end), frame.end)
            stop = cut.start() + 1 if cut is not None else frame.end
            pairs = _PAIR_BYTES.findall(text, at, stop)
            names = list(map(itemgetter(0), pairs))
            ascending = ascending and previous < names[0] and all(map(lt, names, islice(names, 1, None)))
            previous, count = names[-1], count + len(names)
            for name, file in pairs:
                listed.setdefault(file, []).append(name)
            at = cut.end() - 1 if cut is not None else frame.end
        # Strictly ascending (transformers sorts the keys): no name twice; any other order: counted.
        distinct = ascending or len(set(chain.from_iterable(listed.values()))) == count
        texts: dict[str, bytes] = {}
        for file in list(listed):
            names = listed.pop(file)
            text = b"\n".join(sorted(names))
            if text.count(b"\n") != len(names) - 1:  # a raw newline in a name (not JSON) would pass for two names
                return None
            try:
                texts[file.decode()] = text
            except UnicodeDecodeError:
                return None
        return Listing(texts, distinct)

    def fragment_names_text(self, placement: Placement) -> bytes | None:
        """The names of a placed fragment (a shard's, proven), sorted, one a line: as `names_by_file` gives them."""
        if self.map is None:
            return None
        pairs = _PAIR_BYTES.findall(self.map, placement.begin, placement.end)
        return b"\n".join(sorted(map(itemgetter(0), pairs)))

    def parse(self) -> dict[str, str] | None:
        """The weight_map as name -> file, when its body is plain "name": "file" pairs (checked whole by one match);
        None otherwise (the full check parses it). Costs about what json.loads would: only the parent's full check
        (coverage.index_map) asks for it."""
        if not self.parsed:
            self.parsed = True
            frame, text = self.frame, self.map
            if frame is None or text is None:
                return None
            try:
                body = text[frame.first : frame.end].decode()
            except UnicodeDecodeError:
                return None
            if _PAIRS.fullmatch(body) is None:
                return None
            pairs = _PAIR.findall(body)
            self.listed = dict(pairs)
            self.keys_distinct = len(self.listed) == len(pairs)
        return self.listed

    def close(self) -> None:
        if self.map is not None:
            self.map.close()


# The frame rules out backslashes, so a quote always delimits a string; possessive: no backtracking on 60 MB.
_PAIRS = re.compile(r'"[^"]*+"\s*+:\s*+"[^"]*+"(?:\s*+,\s*+"[^"]*+"\s*+:\s*+"[^"]*+")*+')
_PAIR = re.compile(r'"([^"]*+)"\s*+:\s*+"([^"]*+)"')
# The same over the mapped bytes, with JSON's whitespace only.
_PAIRS_BYTES = re.compile(_PAIRS.pattern.replace(r"\s", "[ \t\n\r]").encode())
_PAIR_BYTES = re.compile(_PAIR.pattern.replace(r"\s", "[ \t\n\r]").encode())
_BETWEEN_PAIRS = re.compile(rb'"[ \t\n\r]*+,[ \t\n\r]*+"')  # a value's closing quote, comma, the next key's opening one
_CHUNK = 1 << 22  # bytes of the index whose pairs are objects at once


def first_listed_name(path: Path) -> str | None:
    """The weight_map's first name, from the index's first few KB (a probe of its order, not a check: dayone's writer
    lists the manifest's first tensor first, transformers the name that sorts first); None where not found there."""
    try:
        with open(path, "rb") as f:
            head = f.read(1 << 14)
    except OSError:
        return None
    match = _FIRST_NAME.search(head)
    try:
        return match.group(1).decode() if match is not None else None
    except UnicodeDecodeError:
        return None


_FIRST_NAME = re.compile(rb'"weight_map"[ \t\n\r]*+:[ \t\n\r]*+\{[ \t\n\r]*+"([^"\\]*+)"')


def read_listing(path: Path) -> Listing | None:
    """IndexText(path).names_by_file(), the index mapped and closed here (what a forked process runs)."""
    index = IndexText(path)
    try:
        return index.names_by_file()
    finally:
        index.close()


def _frame(text: mmap.mmap) -> Frame | None:
    key = text.find(b'"weight_map"')
    open_brace = text.find(b"{", key) if key >= 0 else -1
    close_brace = text.find(b"}", open_brace) if open_brace >= 0 else -1
    if close_brace < 0 or text.find(b"\\", open_brace, close_brace) >= 0:
        return None  # escapes: a quote need not end a string; the full check parses it
    first = text.find(b'"', open_brace, close_brace)
    if first < 0 or text[open_brace + 1 : first].strip():
        return None
    key_end = text.find(b'"', first + 1, close_brace)
    value_begin = text.find(b'"', key_end + 1, close_brace) if key_end >= 0 else -1
    value_end = text.find(b'"', value_begin + 1, close_brace) if value_begin >= 0 else -1
    if value_end < 0:
        return None
    key_value = text[key_end + 1 : value_begin]
    following = text.find(b'"', value_end + 1, close_brace)
    between = text[value_end + 1 : following] if following >= 0 else b","
    last = text.rfind(b'"', open_brace, close_brace) + 1
    if key_value.strip() != b":" or between.strip() != b"," or text[last:close_brace].strip():
        return None
    if text[close_brace + 1 :].strip() != b"}" or not _opens_weight_map(text[:key]):
        return None  # the weight_map must be the index's last member, its key the top-level one
    return Frame(first, last, key_value.decode(), between.decode())  # ASCII whitespace, ':' and ','


def _opens_weight_map(head: bytes) -> bool:
    """Whether `head` + the weight_map is a JSON object whose last member is that weight_map: the head (metadata,
    a few bytes) is parsed with the weight_map's value replaced by 0, so a "weight_map" inside a string fails."""
    try:
        top = json.loads(head + b'"weight_map": 0}')
    except (ValueError, RecursionError):
        return False
    return type(top) is dict and top.get("weight_map") == 0


def tiles(placements: list[Placement | None]) -> bool:
    """Whether the shards' fragments, in any order, cover the weight_map's pairs exactly: from its first key to its
    last value, one separator between neighbours, no gap, no overlap, one frame seen by every worker."""
    if not placements or any(p is None for p in placements):
        return False
    ordered = sorted(placements)
    frame = ordered[0].frame
    if ordered[0].begin != frame.first or ordered[-1].end != frame.end:
        return False
    step = len(frame.between)
    return all(p.frame == frame and p.begin == previous.end + step for previous, p in pairwise(ordered))
