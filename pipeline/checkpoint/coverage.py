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
    found = checkpoint.tensors
    expected_names = set()
    missing: list[str] = []
    shape_issues: dict[tuple, list[str]] = {}
    dtype_issues: dict[tuple, list[str]] = {}
    for t in manifest.tensors:
        expected_names.add(t.name)
        hit = found.get(t.name)
        if hit is None:
            missing.append(t.name)
            continue
        info = hit[1]
        if info.shape != t.shape:
            shape_issues.setdefault((t.shape, info.shape), []).append(t.name)
        elif info.dtype != t.dtype:
            dtype_issues.setdefault((t.dtype, info.dtype), []).append(t.name)
    unexpected = [name for name in found if name not in expected_names]
    return Coverage(
        missing=group_names(missing),
        unexpected=group_names(unexpected),
        wrong_shape=[
            f"{p}: expected {list(want)}, found {list(got)}"
            for (want, got), names in shape_issues.items()
            for p in group_names(names)
        ],
        wrong_dtype=[
            f"{p}: expected {want}, found {got}"
            for (want, got), names in dtype_issues.items()
            for p in group_names(names)
        ],
        missing_count=len(missing),
        unexpected_count=len(unexpected),
        mismatched_count=sum(map(len, shape_issues.values())) + sum(map(len, dtype_issues.values())),
    )
