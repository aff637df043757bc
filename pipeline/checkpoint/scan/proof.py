"""One shard header proven byte for byte against the text the manifest predicts for it: no JSON parsed per entry.

Two proofs, tried in turn on the header's text (dayone.checkpoint.scan.text generates the expected text and compares
it whole; equal texts are a proof at least as strict as parsing and checking each entry):

- `_in_safetensors_order`: the manifest's tensors from some position on, in the safetensors library's order (by
  dtype alignment descending, then name): any shard the library or transformers wrote, so a real release. Which run
  of the manifest the shard holds is taken from the shard before it, when the worker proved that one as a run
  (`RunChain`), else from the header's names (the one first in the manifest); the run's names are then sorted as the
  library sorts them and the text they give compared whole.
- `_laid_out_as_listed`: any manifest tensors, in any order, their data laid out in that order (another writer's
  compact JSON: names sorted, or dayone's own writer in manifest order); the names are read from the header by one
  regex pass and looked up one by one (EntryTable.lookup), which costs more.

A header neither proves goes to the plain reader (dayone.checkpoint.scan.workers), which names what is wrong: so a
proof needs to be sound only when it says yes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from dayone.checkpoint.coverage import ShardComparison
from dayone.checkpoint.scan.runs import ManifestRuns
from dayone.checkpoint.scan.text import listed_names, proven_by_dtype, safetensors_order, tensors_start
from dayone.spec.manifest import EntryTable


@dataclass
class Expected:
    """What a worker proves headers against: the manifest as a name table and as runs (both built lazily)."""

    table: EntryTable
    runs: ManifestRuns


@dataclass
class RunChain:
    """The run of the manifest the last shard a worker proved holds (its first name, bytes, count): a worker takes
    consecutive shards, and a writer fills them with consecutive runs, so the next shard's run follows it."""

    first: str | None = None
    nbytes: int = 0
    count: int = 0
    proof: Callable | None = None  # the proof that held for the last shard

    def next_run(self, runs: ManifestRuns, nbytes: int) -> tuple[list[str], list[tuple]] | None:
        """The names and entries of the `nbytes` bytes of tensors after the last run, in manifest order."""
        if self.first is None:
            return None
        both = runs.span(self.first, self.nbytes + nbytes)
        if both is None or len(both[0]) <= self.count:
            return None
        return both[0][self.count :], both[1][self.count :]


def prove_header(
    raw: bytes, data_size: int, path: Path, file: str, expected: Expected, chain: RunChain | None = None
) -> ShardComparison | None:
    """A ShardComparison (every entry the manifest's, the offsets tiling `data_size` bytes) when one of the two
    proofs holds for this header; None otherwise. `chain`: the run the worker's previous shard held."""
    chain = chain if chain is not None else RunChain()
    text = _text(raw, expected.runs)
    start = tensors_start(text, path) if text is not None else None
    if start is None:
        chain.first = None
        return None
    proofs = [_in_safetensors_order, _laid_out_as_listed]
    if chain.proof is _laid_out_as_listed:  # shards of one checkpoint are written alike
        proofs.reverse()
    for proof in proofs:
        result = proof(text, start, data_size, file, expected, chain)
        if result is not None:
            chain.proof = proof
            return result
    chain.first = None
    return None


def _text(raw: bytes, runs: ManifestRuns) -> str | None:
    if not runs.plain_names:  # a name JSON would escape: the generated text would not be its JSON
        return None
    try:
        return raw.decode()
    except UnicodeDecodeError:
        return None


def _in_safetensors_order(text, start, data_size, file, expected, chain) -> ShardComparison | None:
    run = chain.next_run(expected.runs, data_size)
    written = safetensors_order(*run) if run is not None else None
    if written is None or not text.startswith(f'"{written[0][0]}"', start):
        run = _run_holding_listed_names(text, start, data_size, expected.runs)
        written = safetensors_order(*run) if run is not None else None
        if written is None:
            return None
    names = run[0]
    by_dtype = proven_by_dtype(text, start, *written, data_size)
    if by_dtype is None:
        return None
    chain.first, chain.nbytes, chain.count = names[0], data_size, len(names)
    return _proven(file, written[0], by_dtype)


def _run_holding_listed_names(text, start, data_size, runs: ManifestRuns) -> tuple[list[str], list[tuple]] | None:
    """The run of `data_size` bytes from the header's name that comes first in the manifest (one lookup per name:
    what a worker does for its first shard, or where the chain broke)."""
    names = listed_names(text, start)
    positions = list(map(runs.position, names))
    if not names or None in positions:
        return None
    return runs.span(names[positions.index(min(positions))], data_size)


def _laid_out_as_listed(text, start, data_size, file, expected, chain) -> ShardComparison | None:
    names = listed_names(text, start)
    entries = expected.table.lookup(names) if names else [None]
    if None in entries or len(set(names)) != len(names):  # a name twice: JSON keeps one; the plain reader names it
        return None
    by_dtype = proven_by_dtype(text, start, names, entries, data_size)
    if by_dtype is None:
        return None
    chain.first = None  # not known to be a run of the manifest
    return _proven(file, names, by_dtype)


def _proven(file: str, names: list[str], by_dtype: dict[str, int]) -> ShardComparison:
    """A proven shard: every name expected, and its names sorted, one a line, for the parent's index check (the
    names are printable with no quote or backslash: ManifestRuns.plain_names, checked in _text)."""
    names_text = "\n".join(sorted(names)).encode()
    return ShardComparison(file, len(names), by_dtype, seen=len(names), names_text=names_text)
