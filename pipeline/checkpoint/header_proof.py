"""One shard header proven byte for byte against the text the manifest predicts for it: no JSON parsed per entry.

Three ways a header is written, tried in turn on the header's text (dayone.checkpoint.header_text generates the
expected text and compares it whole; equal texts are a proof at least as strict as parsing and checking each entry):

- `prove_written_in_order`: the manifest's tensors from the header's first name on, in manifest order (dayone's
  writer, the K3 skeleton). The names come from the manifest's own sequence; nothing is looked up.
- `prove_in_safetensors_order`: the manifest's tensors from some position on, in the safetensors library's order (by
  dtype alignment descending, then name: any shard the library or transformers wrote, so a real release). Which run
  of the manifest the shard holds is taken from the shard before it, when the worker proved that one as a run
  (`RunChain`), else from the header's names (the one first in the manifest); the run's names are then sorted as the
  library sorts them and the text they give compared whole.
- `prove_laid_out_as_listed`: any manifest tensors, in any order, data laid out in that order; the names are read
  from the header by one regex pass and looked up one by one (EntryTable.lookup), the costliest of the three.

A proven shard's names are then placed in the index as text where it lists them in the same order; where it does not
(transformers sorts it by name), the comparison carries the names, sorted, for the parent, which reads the index once
(dayone.checkpoint.coverage). Anything a proof refuses goes on to the bulk parse and then the entry-by-entry check
(dayone.checkpoint.header_scan), which names what is wrong: so a proof needs to be sound only when it says yes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from dayone.checkpoint.header_text import (
    JSON_SPACE,
    listed_names,
    middle,
    proven_by_dtype,
    safetensors_order,
    tensors_start,
)
from dayone.checkpoint.index_text import IndexCheck, IndexText

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
    # What proves, across shards, that every tensor is held once and where the index says (coverage.py checks that
    # these tile); None where this shard could not give it, and then the parent compares names in full.
    first_at: int | None = None  # the manifest position of the first name, when the shard is the run from there
    index: IndexCheck | None = None  # where or whether the index lists exactly this shard's names (index_text)
    # Where the fragment was not placed: the shard's names sorted, one a line (UTF-8), which the parent compares
    # with the index's names for this file, the index read once (coverage.py).
    names_text: bytes | None = None


@dataclass
class RunChain:
    """The run of the manifest the last shard a worker proved holds (its first name, bytes, count): a worker takes
    consecutive shards, and a writer fills them with consecutive runs, so the next shard's run follows it."""

    first: str | None = None
    nbytes: int = 0
    count: int = 0
    proof: Callable | None = None  # the proof that held for the last shard

    def next_run(self, expected: EntryTable, nbytes: int) -> tuple[list[str], list[tuple]] | None:
        """The names and entries of the `nbytes` bytes of tensors after the last run, in manifest order."""
        if self.first is None:
            return None
        both = expected.span(self.first, self.nbytes + nbytes)
        if both is None or len(both[0]) <= self.count:
            return None
        return both[0][self.count :], both[1][self.count :]

    def follow(self, names: list[str], nbytes: int) -> None:
        self.first, self.nbytes, self.count = names[0], nbytes, len(names)

    def break_off(self) -> None:
        self.first = None


def prove_header(
    raw: bytes,
    data_size: int,
    path: Path,
    file: str,
    expected: EntryTable,
    index: IndexText | None = None,
    chain: RunChain | None = None,
) -> ShardComparison | None:
    """The first of the three proofs that holds for this header, or None."""
    chain = chain if chain is not None else RunChain()
    opened = _opened(raw, path, expected)
    if opened is None:
        chain.break_off()
        return None
    text, start = opened
    proofs = [_in_manifest_order, _in_safetensors_order, _laid_out_as_listed]
    if chain.proof is _in_safetensors_order:  # shards of one checkpoint are written alike (the costly one stays last)
        proofs[:2] = proofs[1::-1]
    for proof in proofs:
        result = proof(text, start, data_size, file, expected, index, chain)
        if result is not None:
            chain.proof = proof
            return result
    chain.break_off()
    return None


def prove_written_in_order(
    raw: bytes, data_size: int, path: Path, file: str, expected: EntryTable, index: IndexText | None = None
) -> ShardComparison | None:
    """A ShardComparison when the header is, byte for byte, the compact JSON of the manifest's tensors from its first
    name on, in manifest order, tiling the data region; None otherwise."""
    return _prove_one(_in_manifest_order, raw, data_size, path, file, expected, index, None)


def prove_in_safetensors_order(
    raw: bytes,
    data_size: int,
    path: Path,
    file: str,
    expected: EntryTable,
    index: IndexText | None = None,
    chain: RunChain | None = None,
) -> ShardComparison | None:
    """A ShardComparison when the header is, byte for byte, what the safetensors library writes for a run of the
    manifest's tensors (the one after `chain`'s, else the one starting at the header's name first in the manifest);
    None otherwise."""
    return _prove_one(_in_safetensors_order, raw, data_size, path, file, expected, index, chain)


def prove_laid_out_as_listed(
    raw: bytes, data_size: int, path: Path, file: str, expected: EntryTable, index: IndexText | None = None
) -> ShardComparison | None:
    """A ShardComparison when the header is, byte for byte, the compact JSON of manifest tensors laid out in the
    order it lists them, tiling the data region; None otherwise."""
    return _prove_one(_laid_out_as_listed, raw, data_size, path, file, expected, index, None)


def _prove_one(proof, raw, data_size, path, file, expected, index, chain) -> ShardComparison | None:
    """One proof alone (what the tests and benchmarks/cli.py --breakdown measure; the scan calls prove_header)."""
    opened = _opened(raw, path, expected)
    if opened is None:
        return None
    return proof(*opened, data_size, file, expected, index, chain if chain is not None else RunChain())


def _opened(raw: bytes, path: Path, expected: EntryTable) -> tuple[str, int] | None:
    """The header's text and where its first tensor entry starts, or None where no proof can apply."""
    text = _text(raw, expected)
    start = tensors_start(text, path) if text is not None else None
    return None if start is None else (text, start)


def _text(raw: bytes, expected: EntryTable) -> str | None:
    if not expected.plain_names:  # a name JSON would escape: the generated text would not be its JSON
        return None
    try:
        return raw.decode()
    except UnicodeDecodeError:
        return None


def _in_manifest_order(text, start, data_size, file, expected, index, chain) -> ShardComparison | None:
    close = text.find('"', start + 1)
    span = expected.span(text[start + 1 : close], data_size) if close > 0 else None
    if span is None:
        return None
    names, entries = span
    last = entries[-1]  # another order (safetensors', say) ends elsewhere: refused before generating the rest
    if not text.rstrip(JSON_SPACE).endswith(f'"{names[-1]}{middle(last)}{data_size - last[2]},{data_size}]}}}}'):
        return None
    return _proven_run(text, start, data_size, file, expected, index, chain, names, entries, names, entries)


def _in_safetensors_order(text, start, data_size, file, expected, index, chain) -> ShardComparison | None:
    run = chain.next_run(expected, data_size)
    written = safetensors_order(*run) if run is not None else None
    if written is None or not text.startswith(f'"{written[0][0]}"', start):
        run = _run_holding_listed_names(text, start, data_size, expected)
        written = safetensors_order(*run) if run is not None else None
        if written is None:
            return None
    return _proven_run(text, start, data_size, file, expected, index, chain, *run, *written)


def _run_holding_listed_names(text, start, data_size, expected) -> tuple[list[str], list[tuple]] | None:
    """The run of `data_size` bytes from the header's name that comes first in the manifest (one lookup per name:
    what a worker does for its first shard, or where the chain broke)."""
    names = listed_names(text, start)
    positions = list(map(expected.position, names))
    if not names or None in positions:
        return None
    return expected.span(names[positions.index(min(positions))], data_size)


def _proven_run(text, start, data_size, file, expected, index, chain, names, entries, written, written_entries):
    """The comparison of a shard holding the run `names` (manifest order), when the header is `written` as compact
    JSON with the manifest's entries, else None."""
    by_dtype = proven_by_dtype(text, start, written, written_entries, data_size)
    if by_dtype is None:
        return None
    chain.follow(names, data_size)
    listing = index_listing(names, file, index, plain=True)  # plain: expected.plain_names, checked in _text
    first_at = expected.position(names[0])
    return ShardComparison(file, len(names), by_dtype, seen=len(names), first_at=first_at, **listing)


def _laid_out_as_listed(text, start, data_size, file, expected, index, chain) -> ShardComparison | None:
    names = listed_names(text, start)
    entries = expected.lookup(names) if names else [None]
    if None in entries or len(set(names)) != len(names):  # a name twice: JSON keeps one; the full check names it
        return None
    by_dtype = proven_by_dtype(text, start, names, entries, data_size)
    if by_dtype is None:
        return None
    chain.break_off()  # not known to be a run of the manifest
    listing = index_listing(names, file, index, plain=True)
    return ShardComparison(file, len(names), by_dtype, seen=len(names), **listing)


def index_listing(names: list[str], file: str, index: IndexText | None, plain: bool = False) -> dict:
    """ShardComparison's index fields for a proven shard: its fragment placed in the index, else its names sorted,
    one a line, for the parent's check (a placement is tried only while this worker's index keeps placing)."""
    if index is None:
        return {}
    check = index.check(names, file, plain)
    if check.placement is not None:
        return {"index": check}
    if not (plain or "".join(names).isprintable()):  # a name holding a newline would pass for two in the text
        return {"index": check}
    return {"index": check, "names_text": "\n".join(sorted(names)).encode()}
