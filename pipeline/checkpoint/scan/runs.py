"""A manifest as a sequence, for shards that hold runs of it: which tensors the `nbytes` bytes from a name on are.

Writers fill shards with consecutive runs of a model's tensors (transformers' save_pretrained splits the state dict,
in the model's order, by size; so does dayone's writer), so a shard's tensors are known, before its header is
looked at, from where the previous shard's run ended and how many data bytes it holds. dayone.checkpoint.scan.proof
then compares the header's text with what the library writes for exactly those tensors.
"""

from __future__ import annotations

from bisect import bisect_left
from itertools import accumulate
from typing import NamedTuple

from dayone.spec.manifest import Entry, ExpertGroup, Manifest

_PLACEHOLDER = "\x00"  # stands for a group's prefix in the names body its group shares; in no tensor name


class _PlainRun(NamedTuple):
    """Consecutive plain tensors of the manifest."""

    names: list[str]
    entries: list[Entry]
    ends: list[int]  # bytes of the run up to each tensor: 0, then after each one

    def names_at(self, begin: int, end: int) -> list[str]:
        return self.names[begin:end]


class _FoldedRun:
    """One expert group as a sequence: names e.suffix for e in order, parts within, as ExpertGroup.expand orders them.
    Its names text (one name a line) is built on first use, in the process that compares against it."""

    def __init__(self, group: ExpertGroup, body: _GroupBody) -> None:
        self.group, self.body = group, body
        self.entries, self.ends = body.entries, body.ends
        self._text: str | None = None

    def names_at(self, begin: int, end: int) -> list[str]:
        return self.text()[self.offset(begin) : self.offset(end) - 1].split("\n") if end > begin else []

    def text(self) -> str:
        if self._text is None:
            self._text = (_PLACEHOLDER + self.body.text).replace(_PLACEHOLDER, self.group.prefix)
        return self._text

    def offset(self, position: int) -> int:
        """Where the name at `position` starts in text() (position == len: one past the text's end)."""
        return self.body.offsets[position] + position * len(self.group.prefix)

    def position(self, name: str) -> int | None:
        """The position of `name` (prefix already matched) in the group, or None if it is none of its names."""
        number, _, suffix = name[len(self.group.prefix) :].partition(".")
        part = self.body.parts.get(suffix)
        if part is None or not number.isdigit() or not number.isascii() or str(int(number)) != number:
            return None
        expert = int(number)
        return expert * len(self.body.parts) + part if expert < self.group.num_experts else None


class _GroupBody(NamedTuple):
    """What every group with the same experts and parts shares: names without the prefix, offsets, entries."""

    text: str  # the names without prefix, one a line, each after the first behind the placeholder for the prefix
    offsets: list[int]  # start of each name in the text, without prefixes; one past the end last
    parts: dict[str, int]  # suffix -> index among the parts
    entries: list[Entry]
    ends: list[int]  # bytes of the group up to each tensor: 0, then after each one


class ManifestRuns:
    """The manifest's names in order, as runs of plain tensors and folded expert groups: which tensors a shard holding
    a run of the manifest holds (`span`), and where a name is (`position`), without expanding every expert's name.

    A K3 has 497k names, 99% of them routed experts. An expert group's names are one text (one name a line, built on
    first use by one `str.replace` of the group's prefix into a body shared by every group of the same experts and
    parts), so a run's names are a slice of it split at newlines: nothing is looked up or hashed per name."""

    def __init__(self, manifest: Manifest) -> None:
        items = manifest.items
        self.runs: list[_PlainRun | _FoldedRun] = []
        self.plain_at: dict[str, tuple[int, int]] = {}  # plain name -> (run, position)
        self.group_at: dict[str, int] = {}  # group prefix -> run
        self.starts: list[int] = []  # position of each run's first tensor, computed on first use
        bodies: dict[tuple, _GroupBody] = {}
        texts = [item.prefix + part.suffix if isinstance(item, ExpertGroup) else item.name for item in items
                 for part in (item.parts if isinstance(item, ExpertGroup) else (None,))]  # fmt: skip
        blob = "".join(texts)
        self.plain_names = '"' not in blob and "\\" not in blob and blob.isprintable()
        for item in items:
            if isinstance(item, ExpertGroup):
                if _PLACEHOLDER in item.prefix or "\n" in item.prefix:
                    self.runs.clear()  # names this text cannot hold: no positional answers at all
                    return
                key = (item.num_experts, item.parts)
                body = bodies.get(key)
                if body is None:
                    body = bodies[key] = _group_body(item)
                    if body is None:
                        self.runs.clear()
                        return
                self.group_at[item.prefix] = len(self.runs)
                self.runs.append(_FoldedRun(item, body))
            else:
                if not self.runs or not isinstance(self.runs[-1], _PlainRun):
                    self.runs.append(_PlainRun([], [], [0]))
                run = self.runs[-1]
                self.plain_at[item.name] = (len(self.runs) - 1, len(run.names))
                run.names.append(item.name)
                run.entries.append((list(item.shape), item.dtype, item.nbytes))
                run.ends.append(run.ends[-1] + item.nbytes)

    def locate(self, name: str) -> tuple[int, int] | None:
        hit = self.plain_at.get(name)
        if hit is not None:
            return hit
        head, sep, _ = name.rpartition(".experts.")
        index = self.group_at.get(head + sep) if sep else None
        if index is None:
            return None
        position = self.runs[index].position(name)
        return None if position is None else (index, position)

    def position(self, name: str) -> int | None:
        """Where `name` is in the manifest's order (0-based over all tensors, experts expanded); None when no tensor
        is called that (or names cannot be placed: then `span` answers None too)."""
        at = self.locate(name) if self.runs else None
        if at is None:
            return None
        if len(self.starts) != len(self.runs):  # on first use: where each run begins among all tensors
            self.starts = list(accumulate((len(run.entries) for run in self.runs), initial=0))[:-1]
        return self.starts[at[0]] + at[1]

    def span(self, first: str, nbytes: int) -> tuple[list[str], list[Entry]] | None:
        """The names and entries of the manifest's tensors in order from `first` on, as many as hold exactly `nbytes`
        bytes (a shard holding a run of the manifest); None when `first` is no tensor's or no such run ends there."""
        at = self.locate(first) if self.runs else None
        if at is None:
            return None
        index, position = at
        names: list[str] = []
        entries: list[Entry] = []
        left = nbytes
        while left > 0:
            if index == len(self.runs):
                return None
            run = self.runs[index]
            ends = run.ends
            want = ends[position] + left
            end = len(ends) - 1 if want >= ends[-1] else bisect_left(ends, want, position)
            if want < ends[-1] and ends[end] != want:
                return None  # no tensor ends at exactly nbytes
            names += run.names_at(position, end)
            entries += run.entries[position:end]
            left -= ends[end] - ends[position]
            index, position = index + 1, 0
        return (names, entries) if entries else None


def _group_body(group: ExpertGroup) -> _GroupBody | None:
    suffixes = [part.suffix for part in group.parts]
    if len(set(suffixes)) != len(suffixes) or any(_PLACEHOLDER in s or "\n" in s for s in suffixes):
        return None
    names = [f"{e}.{suffix}" for e in range(group.num_experts) for suffix in suffixes]
    offsets = [0]
    for name in names:
        offsets.append(offsets[-1] + len(name) + 1)
    entries = [(list(p.shape), p.dtype, p.nbytes) for p in group.parts] * group.num_experts
    ends = list(accumulate((part.nbytes for part in group.parts * group.num_experts), initial=0))
    suffix_at = {s: i for i, s in enumerate(suffixes)}
    return _GroupBody(("\n" + _PLACEHOLDER).join(names), offsets, suffix_at, entries, ends)
