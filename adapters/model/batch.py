"""A batch of requests packed token after token: the layout every sequence op (conv, KDA, MLA) walks."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass


@dataclass(frozen=True)
class Batch:
    """seqlens[b]: new tokens of request b in this call; past[b]: tokens of b already seen (held in a cache).
    Packed activations are [N, ...] with N = sum(seqlens), request b at rows starts[b]:starts[b] + seqlens[b]."""

    seqlens: tuple[int, ...]
    past: tuple[int, ...]

    @property
    def starts(self) -> tuple[int, ...]:
        out, s = [], 0
        for n in self.seqlens:
            out.append(s)
            s += n
        return tuple(out)

    def spans(self) -> Iterator[tuple[int, int, int]]:
        """(request, first row, end row) for every request with new tokens."""
        for b, (start, n) in enumerate(zip(self.starts, self.seqlens)):
            if n:
                yield b, start, start + n
