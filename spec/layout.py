"""Layer layouts: a compact expression tiled over depth, or the 1-based index lists that HF configs carry.

    "23 x [kda kda kda mla] + [mla]"      -> 93 layers, MLA at 0-based 3, 7, ..., 91, 92
    "[dense] + 92 x [moe]"                -> dense layer 0, MoE after it
    {"kda": [1, 2, 3, 5, ...], "mla": [4, 8, ..., 93]}   -> the same table from 1-based lists

Both forms produce the same tuple of kinds; `to_expression` writes the shortest expression back.
"""

from __future__ import annotations

import re

from dayone.errors import InputError

_TERM = re.compile(r"^\s*(?:(\d+)\s*[x*]\s*)?\[([^\]]*)\]\s*$")


def parse_expression(expression: str, allowed: tuple[str, ...], field: str) -> tuple[str, ...]:
    """Expand a layout expression into one kind per layer.

    Grammar: term ("+" term)*, term = [count "x"] "[" kind+ "]". Kinds must come from `allowed`.
    """
    kinds: list[str] = []
    for term in expression.split("+"):
        match = _TERM.match(term)
        if not match:
            raise InputError(
                f"{field}: cannot parse layout term {term.strip()!r} (expected e.g. '23 x [kda kda kda mla]')"
            )
        count = int(match.group(1) or 1)
        block = match.group(2).split()
        if not block:
            raise InputError(f"{field}: empty block in layout term {term.strip()!r}")
        for kind in block:
            if kind not in allowed:
                raise InputError(f"{field}: unknown layer kind {kind!r} (allowed: {', '.join(allowed)})")
        if count < 1:
            raise InputError(f"{field}: repeat count must be at least 1 in {term.strip()!r}")
        kinds.extend(block * count)
    return tuple(kinds)


def from_index_lists(lists: dict[str, list[int]], num_layers: int, field: str) -> tuple[str, ...]:
    """Build the per-layer kinds from 1-based index lists; every layer must be named exactly once."""
    table: list[str | None] = [None] * num_layers
    for kind, indices in lists.items():
        for one_based in indices:
            if not 1 <= one_based <= num_layers:
                raise InputError(f"{field}.{kind}: layer {one_based} is outside 1..{num_layers}")
            previous = table[one_based - 1]
            if previous is not None:
                raise InputError(f"{field}: layer {one_based} is listed as both {previous!r} and {kind!r}")
            table[one_based - 1] = kind
    missing = [i + 1 for i, kind in enumerate(table) if kind is None]
    if missing:
        shown = ", ".join(map(str, missing[:8])) + (" ..." if len(missing) > 8 else "")
        raise InputError(f"{field}: layers {shown} (1-based) are in no list")
    return tuple(table)  # type: ignore[arg-type]


def to_index_lists(kinds: tuple[str, ...]) -> dict[str, list[int]]:
    """The 1-based index list of each kind, in order of first appearance."""
    lists: dict[str, list[int]] = {}
    for i, kind in enumerate(kinds):
        lists.setdefault(kind, []).append(i + 1)
    return lists


def to_expression(kinds: tuple[str, ...]) -> str:
    """The shortest expression (by length of text) that expands back to `kinds`.

    Dynamic programming over positions: a term is either a plain bracket of layers or a block of up to 8 layers
    repeated two or more times; the cheapest split of the suffix is kept for each start.
    """
    n = len(kinds)
    best: list[tuple[int, list[str]]] = [(0, [])] * (n + 1)
    for i in range(n - 1, -1, -1):
        candidates: list[tuple[int, list[str]]] = []
        for j in range(i + 1, n + 1):
            term = "[" + " ".join(kinds[i:j]) + "]"
            candidates.append((len(term) + best[j][0] + 3, [term, *best[j][1]]))
        for period in range(1, 9):
            block = kinds[i : i + period]
            if len(block) < period:
                break
            count = 1
            while kinds[i + count * period : i + (count + 1) * period] == block:
                count += 1
                end = i + count * period
                term = f"{count} x [" + " ".join(block) + "]"
                candidates.append((len(term) + best[end][0] + 3, [term, *best[end][1]]))
        best[i] = min(candidates, key=lambda c: c[0])
    return " + ".join(best[0][1])
