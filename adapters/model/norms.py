"""Plain RMSNorm in fp32 math (the gated per-head form is the gated_rmsnorm op: `dayone.kernels.gated_rmsnorm`)."""

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
