"""Where the sequences of a [B, T, ...] batch lie: B rows of T tokens, or N sequences packed into row 0 by cu_seqlens
(B = 1), as the kernels' `cu_seqlens` argument has it. One definition for the kernels, their torch counterparts and
their references."""

from __future__ import annotations

import torch


def sequence_bounds(batch: int, length: int, cu_seqlens: torch.Tensor | None) -> list[int]:
    """[N + 1] token offsets of the N sequences in the flattened B * T tokens."""
    if cu_seqlens is None:
        return [n * length for n in range(batch + 1)]
    return [int(x) for x in cu_seqlens.tolist()]


def sequence_spans(batch: int, length: int, cu_seqlens: torch.Tensor | None) -> list[tuple[int, int, int]]:
    """(row, start, end) of each of the N sequences: each row whole, or the cu_seqlens spans of row 0."""
    if cu_seqlens is None:
        return [(row, 0, length) for row in range(batch)]
    bounds = sequence_bounds(1, length, cu_seqlens)
    return [(0, bounds[n], bounds[n + 1]) for n in range(len(bounds) - 1)]
