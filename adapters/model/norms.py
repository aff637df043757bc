"""Plain RMSNorm (input, post-attention, final and MLA LoRA norms). It has no kernel of its own: both tiers run the
one fp32 formula, `rms_norm_reference` of kernels/moe_combine/reference.py (the latent norm the MoE combine fuses).
The gated per-head form is the gated_rmsnorm op (`dayone.kernels.gated_rmsnorm`)."""

from __future__ import annotations

import torch
from dayone.kernels.moe_combine.reference import rms_norm_reference


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """x * rsqrt(mean(x^2) + eps) * weight over the last dim, computed in fp32, returned in x's dtype."""
    return rms_norm_reference(x, weight, eps).to(x.dtype)
