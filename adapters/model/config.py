"""The two tiers of the executable model and the precision each tier keeps its weights and activations in.

reference: plain fp32 torch, formulas written for clarity (token-by-token KDA, per-token experts): the truth.
fast: bf16 weights and activations, chunked KDA, experts batched by assignment; fp32 where the math says so.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from dayone.errors import InputError


@dataclass(frozen=True)
class Tier:
    name: str
    dtype: torch.dtype  # activations and (most) weights

    @property
    def is_reference(self) -> bool:
        return self.name == "reference"


TIERS = {"reference": Tier("reference", torch.float32), "fast": Tier("fast", torch.bfloat16)}

# Manifest roles kept in fp32 in both tiers: the checkpoint stores them in fp32 and the math reads them in fp32.
FP32_ROLES = ("kda.a_log", "kda.dt_bias", "kda.conv", "kda.o_norm", "moe.correction_bias")


def get_tier(tier: str | Tier) -> Tier:
    if isinstance(tier, Tier):
        return tier
    if tier not in TIERS:
        raise InputError(f"tier {tier!r} is not known (choose from {', '.join(TIERS)})")
    return TIERS[tier]


def weight_dtype(role: str, tier: Tier) -> torch.dtype:
    """The dtype a module keeps the tensor of `role` in."""
    if role.endswith((".packed", ".scale")):
        return torch.uint8  # MXFP4 bytes, kept as the checkpoint stores them
    for prefix in FP32_ROLES:
        if role == prefix or role.startswith(prefix + "."):
            return torch.float32
    return tier.dtype
