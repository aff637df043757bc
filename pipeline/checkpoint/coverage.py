"""Does a checkpoint hold exactly what its spec's manifest says? Missing, unexpected, wrong shape, wrong dtype."""

from __future__ import annotations

from dataclasses import dataclass

from dayone.checkpoint.patterns import group_names
from dayone.checkpoint.reader import Checkpoint
from dayone.spec.manifest import Manifest


@dataclass(frozen=True)
class Coverage:
    missing: list[str]  # grouped patterns
    unexpected: list[str]
    wrong_shape: list[str]  # "name: expected [..], found [..]" (grouped by name pattern when shapes agree)
    wrong_dtype: list[str]
    missing_count: int
    unexpected_count: int
    mismatched_count: int

    @property
    def ok(self) -> bool:
        return not (self.missing_count or self.unexpected_count or self.mismatched_count)

    def as_dict(self) -> dict:
        return {
            "missing": self.missing,
            "unexpected": self.unexpected,
            "mismatched": {"shape": self.wrong_shape, "dtype": self.wrong_dtype},
            "counts": {
                "missing": self.missing_count,
                "unexpected": self.unexpected_count,
                "mismatched": self.mismatched_count,
            },
        }


def check_coverage(manifest: Manifest, checkpoint: Checkpoint) -> Coverage:
    """One pass over the raw header entries against the manifest's name -> (shape, dtype) table: a K3 release has
    ~500k tensors, so nothing per tensor is built that the verdict does not need."""
    expected = manifest.expected()
    unexpected: list[str] = []
    shape_issues: dict[tuple, list[str]] = {}
    dtype_issues: dict[tuple, list[str]] = {}
    seen = 0
    for header in _headers(checkpoint):
        for name, entry in header.items():
            want = expected.get(name)
            if want is None:
                unexpected.append(name)
                continue
            seen += 1
            shape, dtype = want
            if entry["shape"] != shape:
                shape_issues.setdefault((tuple(shape), tuple(entry["shape"])), []).append(name)
            elif entry["dtype"] != dtype:
                dtype_issues.setdefault((dtype, entry["dtype"]), []).append(name)
    missing = expected.keys() - checkpoint.names() if seen != len(expected) else set()
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
    )


def _headers(checkpoint: Checkpoint):
    """Raw entries per shard ({name: {"dtype", "shape"}}); pickle checkpoints are adapted to the same form."""
    if checkpoint.pickle_files:
        yield {n: {"dtype": i.dtype, "shape": list(i.shape)} for n, i in checkpoint.pickle_tensors.items()}
    for shard in checkpoint.shards.values():
        yield shard.entries
