"""MoE combine in plain fp32 torch: the truth the kernel is compared to.

Kimi K3's latent MoE: the top-k experts' outputs (in the 3584-wide latent space) are summed with the router
weights in fp32, then RMSNorm'd (routed_expert_norm) before routed_expert_up_proj. The sum must be complete (all
tensor/expert-parallel partials in) before the norm. Kimi Linear's plain MoE is the same sum without the norm.
"""

from __future__ import annotations

import torch


def rms_norm_reference(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """fp32 RMSNorm over the last dim: x * rsqrt(mean(x^2) + eps) * weight."""
    x = x.float()
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight.float()


def moe_combine_reference(
    expert_out: torch.Tensor, weights: torch.Tensor, norm_weight: torch.Tensor | None = None, eps: float = 1e-5
) -> torch.Tensor:
    """expert_out [T, k, L], weights [T, k] -> [T, L] in expert_out's dtype: sum_j w_j * out_j (fp32), then RMSNorm."""
    mixed = (weights.float()[..., None] * expert_out.float()).sum(dim=1)
    if norm_weight is not None:
        mixed = rms_norm_reference(mixed, norm_weight, eps)
    return mixed.to(expert_out.dtype)
