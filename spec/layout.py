"""Layer layouts: a compact expression tiled over depth, or the 1-based index lists that HF configs carry.

    "23 x [kda kda kda mla] + [mla]"      -> 93 layers, MLA at 0-based 3, 7, ..., 91, 92
    "[dense] + 92 x [moe]"                -> dense layer 0, MoE after it
    {"kda": [1, 2, 3, 5, ...], "mla": [4, 8, ..., 93]}   -> the same table from 1-based lists

Both forms produce the same tuple of kinds; `to_expression` writes the shortest expression back.
"""

from __future__ import annotations

import re

from dayone.core.errors import InputError
from dayone.spec.bounds import MAX_LAYERS

_TERM = re.compile(r"^\s*(?:(\d+)\s*[x*]\s*)?\[([^\]]*)\]\s*$")


def parse_expression(expression: str, allowed: tuple[str, ...], field: str) -> tuple[str, ...]:
    """Expand a layout expression into one kind per layer.

    Grammar: term ("+" term)*, term = [count "x"] "[" kind+ "]". Kinds must come from `allowed`; the expansion
    is checked against MAX_LAYERS before it is built ("1000000000 x [kda]" allocates nothing).
    """
    if not isinstance(expression, str):
        raise InputError(f"{field}: expected a layout expression (a string), got {type(expression).__name__}")
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
        if len(kinds) + count * len(block) > MAX_LAYERS:
            raise InputError(f"{field}: the layout has more than {MAX_LAYERS} layers")
        kinds.extend(block * count)
    return tuple(kinds)


def from_index_lists(lists: dict[str, list[int]], num_layers: int, field: str) -> tuple[str, ...]:
    """Build the per-layer kinds from 1-based index lists; every layer must be named exactly once."""
    if not isinstance(num_layers, int) or not 0 < num_layers <= MAX_LAYERS:
        raise InputError(f"{field}: {num_layers!r} layers is outside 1..{MAX_LAYERS}")
    table: list[str | None] = [None] * num_layers
    for kind, indices in lists.items():
        if not isinstance(indices, list | tuple):
            raise InputError(f"{field}.{kind}: expected a list of layer numbers, got {type(indices).__name__}")
        for one_based in indices:
            if not isinstance(one_based, int) or isinstance(one_based, bool):
                raise InputError(f"{field}.{kind}: expected layer numbers (integers), got {one_based!r:.40}")
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
    repeated two or more times; the cheapest split of the suffix is kept for each start. Costs are counted, not
    built (prefix sums of the kinds' lengths), and the terms written once at the end: O(n^2) for n layers.
    """
    n = len(kinds)
    # text length of "[k_i ... k_{j-1}]" = 2 + sum of lengths + (j - i - 1) spaces
    prefix = [0] * (n + 1)
    for i, kind in enumerate(kinds):
        prefix[i + 1] = prefix[i] + len(kind) + 1

    def bracket(i: int, j: int) -> int:
        return prefix[j] - prefix[i] + 1

    cost = [0] * (n + 1)
    choice: list[tuple[int, int, int]] = [(0, 0, 0)] * (n + 1)  # (end, period, count); count 1: a plain bracket
    for i in range(n - 1, -1, -1):
        best = (bracket(i, i + 1) + cost[i + 1] + 3, (i + 1, 1, 1))
        for j in range(i + 2, n + 1):
            candidate = bracket(i, j) + cost[j] + 3
            if candidate < best[0]:
                best = (candidate, (j, j - i, 1))
        for period in range(1, 9):
            if i + period > n:
                break
            block = kinds[i : i + period]
            count = 1
            while kinds[i + count * period : i + (count + 1) * period] == block:
                count += 1
                end = i + count * period
                candidate = len(f"{count} x ") + bracket(i, i + period) + cost[end] + 3
                if candidate < best[0]:
                    best = (candidate, (end, period, count))
        cost[i], choice[i] = best
    terms, i = [], 0
    while i < n:
        end, period, count = choice[i]
        block = "[" + " ".join(kinds[i : i + period]) + "]"
        terms.append(block if count == 1 else f"{count} x {block}")
        i = end
    return " + ".join(terms)
