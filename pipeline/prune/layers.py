"""Which layers a pruned checkpoint keeps, and the attention-residual block size that goes with them.

Kept layers are renumbered 0..n-1 in source order. Attention residuals write a snapshot at layers l with
l % block_size == 0, so renumbering moves snapshots. The rule (docs/tools.md):
1. keep the source's block size if, under it, every kept layer keeps its own snapshot flag (always so for a
   prefix such as 0-3, which is then exactly the first n layers of the source model);
2. else the smallest block size under which every kept layer keeps its flag (0,1,3,12 of K3 -> block 3);
3. else keep the source's block size and report the layers whose snapshot flag changed (no block size can give,
   say, kept layers [1, 2]: new layer 0 always snapshots).
`--cover` searches only sets for which 1 or 2 holds, so each kept layer does in the pruned model what it did in
the source: same attention kind, FFN kind and residual action.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from dayone.core.errors import InputError
from dayone.spec.schema import Layer, ModelSpec

Combo = tuple[str, str, bool]  # (attention, ffn, snapshot)


@dataclass(frozen=True)
class Selection:
    layers: tuple[int, ...]  # source indices, ascending; new index = position
    block_size: int | None  # attention-residual block size of the pruned model (None: plain residuals)
    moved: tuple[int, ...]  # source layers whose snapshot flag differs in the pruned model


def combo(layer: Layer) -> Combo:
    return (layer.attention, layer.ffn, layer.snapshot)


def parse_layers(text: str, num_layers: int) -> tuple[int, ...]:
    """'0-3', '0,1,3,12', '0-2,12' (0-based, inclusive ranges) -> sorted unique indices; InputError otherwise."""
    chosen: list[int] = []
    for part in text.split(","):
        part = part.strip()
        bounds = part.split("-")
        try:
            if len(bounds) not in (1, 2) or not all(b.strip().isdigit() for b in bounds):
                raise ValueError
            lo, hi = int(bounds[0]), int(bounds[-1])
        except ValueError:
            raise InputError(f"--layers {text!r}: {part!r} is not a layer or a range like 0-3") from None
        if lo > hi:
            raise InputError(f"--layers {text!r}: range {part!r} runs backwards")
        if hi >= num_layers:
            raise InputError(f"--layers {text!r}: layer {hi} is past the last layer ({num_layers - 1})")
        chosen.extend(range(lo, hi + 1))
    if len(set(chosen)) != len(chosen):
        raise InputError(f"--layers {text!r}: a layer is named twice")
    return tuple(sorted(chosen))


def flags_kept(snapshots: tuple[bool, ...], block: int) -> bool:
    return all((j % block == 0) == flag for j, flag in enumerate(snapshots))


def select(spec: ModelSpec, layers: tuple[int, ...]) -> Selection:
    """Apply the block-size rule (module docstring) to an explicit choice of layers."""
    block = spec.residual.block_size
    if block is None:
        return Selection(layers, None, ())
    snapshots = tuple(spec.layers[i].snapshot for i in layers)
    for candidate in (block, *range(1, len(layers) + 1)):
        if flags_kept(snapshots, candidate):
            return Selection(layers, candidate, ())
    moved = tuple(i for j, i in enumerate(layers) if (j % block == 0) != spec.layers[i].snapshot)
    return Selection(layers, block, moved)


def cover(spec: ModelSpec, dense_first: bool) -> Selection:
    """The smallest set of layers holding every (attention, FFN, residual action) combination of the spec.

    dense_first: the pruned FFN layout must be dense layers then MoE layers (a config that says
    first_k_dense_replace rather than listing every layer's kind). Among the smallest sets the earliest layers win
    (lexicographic order), with the source's block size preferred, then the smallest block size.
    """
    table = spec.layers
    combos = sorted({combo(layer) for layer in table})
    bit = {c: 1 << i for i, c in enumerate(combos)}
    full = (1 << len(combos)) - 1
    attention_residuals = spec.residual.block_size is not None
    for size in range(len(combos), len(table) + 1):
        blocks = (spec.residual.block_size, *range(1, size + 1)) if attention_residuals else (None,)
        found = [
            (layers, block)
            for block in dict.fromkeys(blocks)
            if (layers := _search(table, bit, full, size, block, dense_first))
        ]
        if found:
            layers, block = min(found, key=lambda item: item[0])  # min keeps the first (preferred block) on ties
            return Selection(layers, block, ())
    raise InputError(f"{spec.name}: no set of layers covers every combination")  # unreachable: all layers do


def _search(table, bit, full, size, block, dense_first) -> tuple[int, ...] | None:
    """Earliest increasing sequence of `size` layers covering `full`, whose snapshot flags follow `block`."""
    n = len(table)

    def wanted(j: int) -> bool | None:
        return None if block is None else j % block == 0

    @cache
    def solve(j: int, after: int, mask: int, moe_seen: bool) -> tuple[int, ...] | None:
        if j == size:
            return () if mask == full else None
        if (full & ~mask).bit_count() > size - j:
            return None
        for i in range(after, n - (size - j - 1)):
            layer = table[i]
            if wanted(j) is not None and layer.snapshot != wanted(j):
                continue
            if dense_first and moe_seen and layer.ffn == "dense":
                continue
            rest = solve(j + 1, i + 1, mask | bit[combo(layer)], moe_seen or layer.ffn == "moe")
            if rest is not None:
                return (i, *rest)
        return None

    return solve(0, 0, 0, False)
