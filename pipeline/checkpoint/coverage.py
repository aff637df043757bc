"""Does a checkpoint hold exactly what its spec's manifest says? Missing, unexpected, wrong shape, wrong dtype.

`scan_coverage` compares every shard in parallel worker processes (dayone.checkpoint.header_scan), which send back
counts and only the names that are off; `check_coverage` compares headers a Checkpoint has already read. Both
are exact: a shard holding another shard's tensor, or anything the index assigns elsewhere, is an InputError naming it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from dayone.checkpoint.forked import Forked
from dayone.checkpoint.header_proof import ShardComparison
from dayone.checkpoint.header_scan import compare_entries, scan_shards
from dayone.checkpoint.index_text import IndexCheck, IndexText, Listing, first_listed_name, read_listing, tiles
from dayone.checkpoint.patterns import group_names
from dayone.checkpoint.reader import Checkpoint, _read_index, name_index_disagreement
from dayone.spec.manifest import EntryTable, Manifest

Expected = EntryTable


# Real checkpoints differ from a spec in float dtypes without being wrong: transformers saves a bf16 Kimi Linear with
# its router weight and bias in fp32 and A_log in bf16. The model loads a float tensor in the dtype it is stored in, so
# one float dtype where the spec says another is a finding; a float where an integer is expected stays a mismatch.
FLOAT_DTYPES = frozenset({"BF16", "F16", "F32", "F64"})


@dataclass(frozen=True)
class Coverage:
    missing: list[str]  # grouped patterns
    unexpected: list[str]
    wrong_shape: list[str]  # "pattern: expected [..], found [..]"
    wrong_dtype: list[str]
    missing_count: int
    unexpected_count: int
    mismatched_count: int
    # Float tensors stored in another float dtype than the spec's: findings, not mismatches (see FLOAT_DTYPES).
    dtype_findings: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.missing_count or self.unexpected_count or self.mismatched_count)

    def as_dict(self) -> dict:
        return {
            "missing": self.missing,
            "unexpected": self.unexpected,
            "mismatched": {"shape": self.wrong_shape, "dtype": self.wrong_dtype},
            "findings": {"dtype": self.dtype_findings},
            "counts": {
                "missing": self.missing_count,
                "unexpected": self.unexpected_count,
                "mismatched": self.mismatched_count,
            },
        }


def check_coverage(manifest: Manifest, checkpoint: Checkpoint) -> Coverage:
    """Coverage from the checkpoint's (already read) headers, in this process."""
    expected = EntryTable(manifest)
    if checkpoint.pickle_files:
        entries = {n: {"dtype": i.dtype, "shape": list(i.shape)} for n, i in checkpoint.pickle_tensors.items()}
        shards = [compare_entries("pickle", entries, {}, expected)]
    else:
        shards = [compare_entries(f, h.entries, h.bytes_by_dtype, expected) for f, h in checkpoint.shards.items()]
        if checkpoint.index_path is not None:
            explain_misplaced(checkpoint, index_map(checkpoint.index_path))
    return assemble(shards, expected, checkpoint)


def scan_coverage(manifest: Manifest, checkpoint: Checkpoint) -> tuple[Coverage, list[ShardComparison]]:
    """Read, check and compare every shard header in parallel worker processes.

    Cross-shard checks come from the counts the workers send back; when they do not add up (a duplicate tensor, an
    index that disagrees with the headers, missing tensors) the checkpoint's own header reading names the culprit.
    """
    if checkpoint.pickle_files:
        coverage = check_coverage(manifest, checkpoint)
        return coverage, []
    expected = EntryTable(manifest)
    # the files the index's naming implies, unverified: the scan proves the index lists exactly these (index_proven)
    jobs = [(checkpoint.root / f, f) for f in checkpoint.shard_files]
    index_path = checkpoint.index_path
    listing = listing_alongside(index_path, expected) if index_path is not None else None
    listed: Listing | None = None  # the index read once, where a shard's fragment was not placed in it as text
    try:
        results = scan_shards(jobs, expected, index_path=index_path, placing=listing is None)
        for result in results:
            if isinstance(result, Exception):
                raise result
        if index_path is not None and not all(r.index is not None and r.index.placement for r in results):
            listed = listing.result() if listing is not None else read_listing(index_path)
            check_listed(results, listed, index_path)
    finally:
        if listing is not None:
            listing.close()
    counts = {r.file: r.tensors for r in results}
    if index_path is not None:
        if lists_exactly(results, listed):
            checkpoint.index_proven(counts)
        else:
            scanned = list(checkpoint.shard_files)
            if (
                checkpoint.files != scanned
            ):  # counted: the files are the index's own  # the index names other shards than its naming implied: scan those
                return scan_coverage(manifest, checkpoint)
    seen = sum(r.seen for r in results)
    unexpected = [n for r in results for n in r.unexpected]
    if (
        (checkpoint.index_counts is not None and counts != checkpoint.index_counts)
        or seen > len(expected)
        or len(set(unexpected)) != len(unexpected)
        or not held_once_where_listed(results, expected, checkpoint.index_path is not None)
    ):
        checkpoint.shards  # noqa: B018 - reading them sequentially raises the precise error
        if checkpoint.index_path is not None:
            explain_misplaced(checkpoint, index_map(checkpoint.index_path))
    return assemble(results, expected, checkpoint), results


def listing_alongside(index_path: Path, expected: Expected) -> Forked | None:
    """The index read once (names per file) in a forked process alongside the header scan, when its first name is not
    the manifest's first tensor's: then it is in another order than the manifest's (transformers sorts it by name),
    and a shard proven in any order cannot be placed in it as text. None otherwise: should a shard still not be
    placed, the parent reads the index after the scan. Either way no worker parses it."""
    first = first_listed_name(index_path)
    if first is not None and expected.position(first) == 0:
        return None
    return Forked(read_listing, index_path)


def check_listed(results: list[ShardComparison], listing: Listing | None, index_path: Path) -> None:
    """Each proven shard's index check from the index read once: its names (sent sorted, or those of its placed
    fragment) are exactly the names listed for its file. A shard the full check compared (index None) stays unproven."""
    index: IndexText | None = None  # mapped only for a placed fragment's names
    try:
        for r in results:
            if r.index is None:
                continue
            text = r.names_text
            if text is None and r.index.placement is not None:
                index = index or IndexText(index_path)
                text = index.fragment_names_text(r.index.placement)
            agrees = listing is not None and text is not None and listing.texts.get(r.file) == text
            r.index = IndexCheck(r.index.placement, agrees, listing is not None and listing.keys_distinct)
    finally:
        if index is not None:
            index.close()


def lists_exactly(results: list[ShardComparison], listed: Listing | None) -> bool:
    """Proof that the index lists every scanned shard's names under its file and names no other file (so its per-file
    counts are the headers'): the shards' fragments tile its weight_map, or (read once) it lists exactly the scanned
    files, each agreeing with its shard, no name twice. False means only "not proven here": the index is counted."""
    checks = [r.index for r in results]
    if any(check is None for check in checks):
        return False
    if all(check.placement is not None for check in checks):
        return tiles([check.placement for check in checks])
    return (
        listed is not None
        and listed.texts.keys() == {r.file for r in results}
        and all(check.agrees and check.keys_distinct for check in checks)
    )


def held_once_where_listed(results: list[ShardComparison], expected: Expected, indexed: bool) -> bool:
    """Proof from what the workers sent that no tensor is in two shards (or listed by the index under another file):
    the shards are runs of the manifest that tile it, and (`indexed`) their fragments tile the index's weight_map
    (dayone.checkpoint.index_text). False means only "not proven here": the parent then compares names in full.

    Per-file counts and the number of expected names seen cannot tell a shard holding a second copy of another
    shard's tensor in place of a missing one, or two shards that swapped tensors, from a correct checkpoint."""
    if indexed:
        checks = [r.index for r in results]
        if any(check is None for check in checks):
            return False
        if not all(check.placement is not None for check in checks):
            # Every shard's names listed under its file, no name listed twice, per-file counts equal (checked by
            # the caller): each shard holds exactly the names listed for it, and no name is in two shards.
            return all(check.agrees and check.keys_distinct for check in checks)
        if not tiles([check.placement for check in checks]):
            return False
    if len(results) == 1 and not results[0].unexpected:
        return True  # one header: its names are distinct JSON keys, and the index (if any) is proven above
    runs = sorted((r.first_at, r.tensors) for r in results if r.first_at is not None)
    if len(runs) != len(results):
        return False
    at = 0
    for first_at, count in runs:
        if first_at != at:
            return False
        at += count
    return at == len(expected)


def index_map(index_path: Path) -> dict[str, str]:
    """The index's weight_map, name -> file, as JSON reads it (a name given twice: the last wins): by one regex
    match over its text where index_text can (0.47 s CPU on the K3 index, the reader's parse 0.6 s), else
    parsed in full by the reader."""
    index = IndexText(index_path)
    try:
        listed = index.parse()
    finally:
        index.close()
    return listed if listed is not None else _read_index(index_path)


def explain_misplaced(checkpoint: Checkpoint, listed: dict[str, str]) -> None:
    """Raise the InputError naming the first tensor where the headers and the index (`listed`) differ; return when
    they agree exactly. Duplicates across shards and per-file count mismatches are named by checkpoint.shards."""
    name_index_disagreement(listed, checkpoint.shards, checkpoint.source)


def assemble(shards: list[ShardComparison], expected: Expected, checkpoint: Checkpoint) -> Coverage:
    seen = sum(s.seen for s in shards)
    missing = expected.keys() - checkpoint.names() if seen != len(expected) else set()
    shape_issues: dict[tuple, list[str]] = {}
    dtype_issues: dict[tuple, list[str]] = {}
    for s in shards:
        for key, names in s.wrong_shape.items():
            shape_issues.setdefault(key, []).extend(names)
        for key, names in s.wrong_dtype.items():
            dtype_issues.setdefault(key, []).extend(names)
    findings = {key: dtype_issues.pop(key) for key in list(dtype_issues) if set(key) <= FLOAT_DTYPES}
    unexpected = [n for s in shards for n in s.unexpected]
    return Coverage(
        missing=group_names(missing),
        unexpected=group_names(unexpected),
        wrong_shape=[
            f"{p}: expected {list(want)}, found {list(got)}"
            for (want, got), names in sorted(shape_issues.items())
            for p in group_names(names)
        ],
        wrong_dtype=[
            f"{p}: expected {want}, found {got}"
            for (want, got), names in sorted(dtype_issues.items())
            for p in group_names(names)
        ],
        missing_count=len(missing),
        unexpected_count=len(unexpected),
        mismatched_count=sum(map(len, shape_issues.values())) + sum(map(len, dtype_issues.values())),
        dtype_findings=[
            f"{p}: stored as {got}, the spec expects {want}: used as stored"
            for (want, got), names in sorted(findings.items())
            for p in group_names(names)
        ],
    )
