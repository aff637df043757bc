"""Gated RMSNorm in torch through F.rms_norm: the CPU fast tier for norm.py (fp32 math, output in x's dtype)."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def gated_rmsnorm_torch(x, gate, weight, eps):
    """Arguments and results as in `dayone.kernels.gated_rmsnorm.gated_rmsnorm`."""
    y = F.rms_norm(x.float(), (x.shape[-1],), weight.float(), eps) * torch.sigmoid(gate.float())
    return y.to(x.dtype)
