"""Does a checkpoint hold exactly what its spec's manifest says? Missing, unexpected, wrong shape, wrong dtype.

`scan_coverage` compares every shard in parallel worker processes (dayone.checkpoint.header_scan), which send back
counts and only the names that are off; `check_coverage` compares headers a Checkpoint has already read.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dayone.checkpoint.header_scan import ShardComparison, compare_entries, scan_shards
from dayone.checkpoint.patterns import group_names
from dayone.checkpoint.reader import Checkpoint
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
    results = scan_shards([(checkpoint.root / f, f) for f in checkpoint.files], expected)
    for result in results:
        if isinstance(result, Exception):
            raise result
    counts = {r.file: r.tensors for r in results}
    seen = sum(r.seen for r in results)
    unexpected = [n for r in results for n in r.unexpected]
    if (
        (checkpoint.index_counts is not None and counts != checkpoint.index_counts)
        or seen > len(expected)
        or len(set(unexpected)) != len(unexpected)
    ):
        checkpoint.shards  # noqa: B018 - reading them sequentially raises the precise error
    return assemble(results, expected, checkpoint), results


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
