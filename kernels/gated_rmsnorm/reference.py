"""Per-head RMSNorm with a sigmoid output gate in plain fp32 torch: the truth for gated_rmsnorm.

o = x * rsqrt(mean(x^2) + eps) * weight * sigmoid(gate), over the last dim (one head of V channels).
"""

from __future__ import annotations

import torch


def gated_rmsnorm_reference(
    x: torch.Tensor, gate: torch.Tensor, weight: torch.Tensor, eps: float = 1e-5
) -> torch.Tensor:
    """x, gate: [..., V]; weight: [V]. Returns fp32 [..., V]."""
    x, gate, weight = x.float(), gate.float(), weight.float()
    rms = torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    return x / rms * weight * torch.sigmoid(gate)
