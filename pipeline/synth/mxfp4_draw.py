"""MXFP4 expert weights drawn as codes and scales directly: what quantizing a Gaussian weight would store, without
drawing and quantizing the fp32 weight first (at the faithful scale that took two thirds of a synthesis).

    packed, scale = draw_mxfp4(rows, cols, std, generator)   # weight_packed [rows, cols/2], weight_scale [rows, cols/32]

The OCP recipe (dayone.kernels.mxfp4.reference.quantize_mxfp4) gives a group of 32 elements of N(0, std^2) the
shared exponent e = floor(log2(amax)) - 2, amax = std * M with M the largest of 32 |N(0, 1)|, and each element the
E2M1 value nearest to w / 2^e. Both are drawn here from their exact distributions, as lookup tables of 65536 entries
indexed by uniform 16-bit draws (integer draws and gathers only, about 8x faster than randn and quantize):
- the group: (e, b) with b = M * std / 2^e in [4, 8), the group's bound in scaled units, taken in BOUND_BINS bins
  from the distribution of M, P(M < x) = erf(x / sqrt 2)^32;
- the group's largest element: the code its bound rounds to, at a drawn place in the group with a drawn sign;
- each byte (two elements, the low nibble the even column): two codes drawn independently, each from the Gaussian's
  mass on the code's rounding interval (ties to even, as the quantizer rounds) below the group's bound, signs equal.
What this leaves out: the spread of the bound within a bin (each bin is drawn at its centre) and the dependence
between elements through M. The dequantized weight has the Gaussian's RMS to within a few
percent (tests/synth/test_mxfp4_draw.py), which is all the draw's scales ask of it (dayone.synth.draw).
"""

from __future__ import annotations

import math

import torch
from dayone.kernels.mxfp4.reference import E2M1_EMAX, E8M0_BIAS, GROUP_SIZE

TABLE_BITS = 16
TABLE = 1 << TABLE_BITS
BOUND_BINS = 8  # bins of the group bound b over [4, 8): 0.5 wide
# Upper edges of the E2M1 rounding intervals in scaled units (index i rounds [edge[i-1], edge[i]]), ties to even.
EDGES = (0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0)
M_RANGE = (0.5, 7.0)  # P(M < 0.5) ~ 1e-16, P(M > 7) ~ 1e-10: the exponents outside are never drawn


def _half_normal_cdf(x: torch.Tensor) -> torch.Tensor:
    return torch.special.erf(x / math.sqrt(2.0))


def _max_cdf(m: torch.Tensor) -> torch.Tensor:
    """P(M < m), M the largest of GROUP_SIZE |N(0, 1)|."""
    return _half_normal_cdf(m).clamp(min=0.0) ** GROUP_SIZE


def _table(probabilities: torch.Tensor) -> torch.Tensor:
    """[n] probabilities -> [TABLE] int64 outcomes, each outcome on its share of entries (largest remainder), so a
    uniform index draws it with that probability to within 1/TABLE."""
    p = probabilities.double().clamp(min=0.0)
    exact = p / p.sum() * TABLE
    counts = exact.floor().long()
    short = TABLE - int(counts.sum())
    counts[torch.argsort(exact - counts, descending=True, stable=True)[:short]] += 1
    return torch.repeat_interleave(torch.arange(len(p)), counts)


def _code_probabilities(ratio: float, bound: float) -> torch.Tensor:
    """[16] P(code) of one element, w = z * std, z ~ N(0, 1) with |z| * ratio <= bound (ratio = std / 2^e): the mass of
    each rounding interval, halved between the two signs (bit 3; a negative value rounding to 0 is code 8, -0.0)."""
    edges = torch.tensor((0.0, *EDGES, math.inf), dtype=torch.float64).clamp(max=bound)
    mass = _half_normal_cdf(edges / ratio).diff()
    half = mass / mass.sum() / 2
    return torch.cat((half, half))


class Mxfp4Tables:
    """The lookup tables of one weight std: which (exponent, bound bin) a group gets, and each pair's byte."""

    def __init__(self, std: float) -> None:
        lo, hi = (math.floor(math.log2(std * m)) - E2M1_EMAX for m in M_RANGE)
        exponents = list(range(lo, hi + 1))
        group_p, bytes_tables = [], []
        for e in exponents:
            ratio = std / 2.0**e
            for j in range(BOUND_BINS):
                b_lo, b_hi = 4.0 + 4.0 * j / BOUND_BINS, 4.0 + 4.0 * (j + 1) / BOUND_BINS
                edges = torch.tensor((b_lo / ratio, b_hi / ratio), dtype=torch.float64)
                group_p.append(_max_cdf(edges).diff())
                codes = _code_probabilities(ratio, (b_lo + b_hi) / 2)
                pair = (codes[:, None] * codes[None, :]).reshape(-1)  # [hi nibble code, lo nibble code]
                bytes_tables.append(_table(pair).to(torch.uint8))
        self.group = _table(torch.cat(group_p)).to(torch.int32)  # -> (exponent, bin) index
        # the group's largest element: the E2M1 index its bound rounds to (4 below 5, 6 above)
        centres = [4.0 + 4.0 * (j + 0.5) / BOUND_BINS for j in range(BOUND_BINS)]
        self.max_index = torch.tensor([6 if c < EDGES[-1] else 7 for c in centres] * len(exponents), dtype=torch.uint8)
        self.scale_byte = torch.tensor([e + E8M0_BIAS for e in exponents for _ in range(BOUND_BINS)], dtype=torch.uint8)
        self.bytes = torch.stack(bytes_tables).reshape(-1)  # [(exponent, bin) * TABLE + draw] -> packed byte


def draw_mxfp4(rows: int, cols: int, std: float, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """(weight_packed [rows, cols/2] uint8, weight_scale [rows, cols/32] uint8) of a [rows, cols] N(0, std^2) weight,
    as quantize_mxfp4 would store it (see the module's docstring for what is approximated)."""
    if cols % GROUP_SIZE:
        raise ValueError(f"draw_mxfp4: {cols} columns is not a multiple of {GROUP_SIZE}")
    tables = Mxfp4Tables(std)
    groups = cols // GROUP_SIZE
    kind = tables.group[torch.randint(0, TABLE, (rows, groups), generator=gen, dtype=torch.int32)]
    draws = torch.randint(0, TABLE, (rows, groups, GROUP_SIZE // 2), generator=gen, dtype=torch.int32)
    packed = tables.bytes[draws | (kind[..., None] << TABLE_BITS)]
    # The largest element, at a drawn place in its group with a drawn sign: one nibble of one byte replaced.
    place = torch.randint(0, 2 * GROUP_SIZE, (rows, groups, 1), generator=gen, dtype=torch.int64)
    code = (tables.max_index[kind][..., None] | ((place >> 5) << 3).to(torch.uint8)).to(torch.uint8)
    byte, shift = (place & (GROUP_SIZE - 1)) >> 1, ((place & 1) * 4).to(torch.uint8)
    kept = packed.gather(-1, byte) & (0xF0 >> shift)
    packed.scatter_(-1, byte, kept | (code << shift))
    return packed.reshape(rows, cols // 2), tables.scale_byte[kind]
