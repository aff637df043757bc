"""RMSNorm in fp32 math (plain, and the per-head gated form of KDA's o_norm)."""

from __future__ import annotations

import torch


def rms_norm(x: torch.Tensor, weight: torch.Tensor | None, eps: float) -> torch.Tensor:
    """x * rsqrt(mean(x^2) + eps) * weight over the last dim, computed in fp32, returned in x's dtype.
    weight None: no scale (the attention-residual row norm)."""
    xf = x.float()
    y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    if weight is not None:
        y = y * weight.float()
    return y.to(x.dtype)


def gated_rms_norm(o: torch.Tensor, weight: torch.Tensor, gate: torch.Tensor, eps: float) -> torch.Tensor:
    """KDA output norm: RMSNorm_head(o; weight) * sigmoid(gate), fp32 math. o, gate [..., H, V]; weight [V]."""
    y = rms_norm(o.float(), weight, eps) * torch.sigmoid(gate.float())
    return y.to(o.dtype)
