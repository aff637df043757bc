"""Rotary position embedding of MLA's rope dims, DeepSeek-V3's convention, with optional YaRN scaling.

Per rotated pair i of the R = qk_rope_head_dim dims (interleave: dims 2i, 2i+1 as DeepSeek-V3 stores them; else
dims i, i + R/2), a token at position p turns the pair by the angle p * inv_freq[i], inv_freq[i] = theta^(-2i/R):
    (x, y) -> a * (x cos - y sin, y cos + x sin)
with a = 1 without scaling. YaRN (`RopeScaling`) divides the low frequencies by `factor` (a linear ramp between the
dims turning beta_fast and beta_slow times over original_max_position_embeddings, bounds rounded outwards), sets
a = m(factor, mscale) / m(factor, mscale_all_dim) and multiplies the softmax scale by m(factor, mscale_all_dim)^2,
m(s, k) = 0.1 k ln s + 1 (1 for s <= 1): the spec's RopeScaling.amplitude and MLASpec.softmax_scale. Both tiers
call this module; the angles are fp32 in both.
"""

from __future__ import annotations

import math

import torch
from dayone.spec.schema import Rope


def inverse_frequencies(rope: Rope, dim: int) -> torch.Tensor:
    """[dim / 2] fp32: the angle per position of each rotated pair."""
    exponents = torch.arange(0, dim, 2, dtype=torch.float32) / dim
    extrapolated = 1.0 / rope.theta**exponents
    s = rope.scaling
    if s is None:
        return extrapolated
    interpolated = extrapolated / s.factor

    def pair_turning(turns: float) -> float:
        """The (fractional) dim index whose pair turns `turns` times over the original context."""
        return dim * math.log(s.original_max_position_embeddings / (turns * 2 * math.pi)) / (2 * math.log(rope.theta))

    low = max(math.floor(pair_turning(s.beta_fast)), 0)
    high = min(math.ceil(pair_turning(s.beta_slow)), dim - 1)
    ramp = ((torch.arange(dim // 2, dtype=torch.float32) - low) / (high - low or 1e-3)).clamp(0, 1)
    return interpolated * ramp + extrapolated * (1 - ramp)  # ramp 0: fast-turning pairs keep their frequency


class Rotary:
    """The rotation of one MLA spec's rope dims; `rotate` is the same maths for both tiers (fp32 angles)."""

    def __init__(self, rope: Rope, dim: int) -> None:
        self.interleave = rope.interleave
        self.inv_freq = inverse_frequencies(rope, dim)
        self.amplitude = rope.scaling.amplitude if rope.scaling is not None else 1.0

    def rotate(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """x [n, ..., R] (any heads in between), positions [n] -> x rotated, in x's dtype (math in fp32)."""
        angles = positions.to(torch.float32)[:, None] * self.inv_freq.to(x.device)  # [n, R/2]
        angles = angles.view(angles.shape[0], *([1] * (x.dim() - 2)), angles.shape[-1])
        cos, sin = angles.cos() * self.amplitude, angles.sin() * self.amplitude
        xf = x.float()
        if self.interleave:
            a, b = xf[..., 0::2], xf[..., 1::2]
            return torch.stack([a * cos - b * sin, b * cos + a * sin], dim=-1).flatten(-2).to(x.dtype)
        a, b = xf.chunk(2, dim=-1)
        return torch.cat([a * cos - b * sin, b * cos + a * sin], dim=-1).to(x.dtype)
