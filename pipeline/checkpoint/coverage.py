"""Does a checkpoint hold exactly what its spec's manifest says? Missing, unexpected, wrong shape, wrong dtype.

`check_coverage` compares the headers the plain reader (dayone.checkpoint.reader) reads, in this process: the
reference. `integrate inspect` and the run's coverage stage take the fast path, dayone.checkpoint.scan, which gives
the same answer (tests/checkpoint/test_scan_agrees.py) or leaves it to this. Both are exact: a shard holding another
shard's tensor, or anything the index assigns elsewhere, is an InputError naming it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dayone.checkpoint.patterns import group_names
from dayone.checkpoint.reader import Checkpoint, _read_index, name_index_disagreement
from dayone.spec.manifest import EntryTable, Manifest

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


@dataclass
class ShardComparison:
    """One shard against the manifest: what a scan worker sends back (small unless the shard is badly off)."""

    file: str
    tensors: int
    bytes_by_dtype: dict[str, int]
    seen: int = 0  # entries the manifest expects
    unexpected: list[str] = field(default_factory=list)
    wrong_shape: dict[tuple, list[str]] = field(default_factory=dict)
    wrong_dtype: dict[tuple, list[str]] = field(default_factory=dict)
    # The shard's names sorted, one a line (UTF-8): what the scan compares with the names the index lists for the file.
    names_text: bytes | None = None


def compare_entries(file: str, entries: dict, bytes_by_dtype: dict[str, int], expected: EntryTable) -> ShardComparison:
    """One parsed header's entries (name -> {dtype, shape, ...}) against the manifest, name by name."""
    result = ShardComparison(file, len(entries), bytes_by_dtype)
    seen = 0
    for name, entry in entries.items():
        want = expected.get(name)
        if want is None:
            result.unexpected.append(name)
            continue
        seen += 1
        shape, dtype = want[0], want[1]
        if entry["shape"] != shape:
            result.wrong_shape.setdefault((tuple(shape), tuple(entry["shape"])), []).append(name)
        elif entry["dtype"] != dtype:
            result.wrong_dtype.setdefault((dtype, entry["dtype"]), []).append(name)
    result.seen = seen
    return result


def check_coverage(manifest: Manifest, checkpoint: Checkpoint) -> Coverage:
    """Coverage from the checkpoint's headers as the plain reader reads and checks them, in this process."""
    return reference_coverage(manifest, checkpoint)[0]


def reference_coverage(manifest: Manifest, checkpoint: Checkpoint) -> tuple[Coverage, list[ShardComparison]]:
    """check_coverage with each shard's comparison (counts and bytes per dtype, what inspect reports)."""
    expected = EntryTable(manifest)
    if checkpoint.pickle_files:
        entries = {n: {"dtype": i.dtype, "shape": list(i.shape)} for n, i in checkpoint.pickle_tensors.items()}
        return assemble([compare_entries("pickle", entries, {}, expected)], expected, checkpoint), []
    shards = [compare_entries(f, h.entries, h.bytes_by_dtype, expected) for f, h in checkpoint.shards.items()]
    if checkpoint.index_path is not None:
        explain_misplaced(checkpoint, _read_index(checkpoint.index_path))
    return assemble(shards, expected, checkpoint), shards


def explain_misplaced(checkpoint: Checkpoint, listed: dict[str, str]) -> None:
    """Raise the InputError naming the first tensor where the headers and the index (`listed`) differ; return when
    they agree exactly. Duplicates across shards and per-file count mismatches are named by checkpoint.shards."""
    name_index_disagreement(listed, checkpoint.shards, checkpoint.source)


def assemble(shards: list[ShardComparison], expected: EntryTable, checkpoint: Checkpoint) -> Coverage:
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
