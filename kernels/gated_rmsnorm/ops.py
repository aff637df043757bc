"""The public op of dayone.kernels.gated_rmsnorm: gated_rmsnorm; the Triton kernel for CUDA tensors, the torch
counterpart for CPU ones (dayone.kernels.dispatch)."""

from __future__ import annotations

import torch
from dayone.kernels.dispatch import use_triton
from dayone.kernels.gated_rmsnorm.norm import gated_rmsnorm_triton
from dayone.kernels.gated_rmsnorm.torch_norm import gated_rmsnorm_torch


def gated_rmsnorm(
    x: torch.Tensor, gate: torch.Tensor, weight: torch.Tensor, eps: float = 1e-5, *, backend: str | None = None
) -> torch.Tensor:
    """Normalise each head's V channels in fp32 and gate them.

    Args:
        x: [..., H, V] (e.g. the KDA output [B, T, H, V]); gate: same shape (g_proj output); weight: [V]
        (shared by all heads); eps: added to mean(x^2).
    Returns:
        [..., H, V] in x's dtype.
    """
    if gate.shape != x.shape or weight.shape != x.shape[-1:]:
        raise ValueError(f"gate must match x {tuple(x.shape)} and weight be [{x.shape[-1]}]; "
                         f"got gate {tuple(gate.shape)}, weight {tuple(weight.shape)}")  # fmt: skip
    triton = use_triton(x, backend, "gated_rmsnorm")
    return (gated_rmsnorm_triton if triton else gated_rmsnorm_torch)(x, gate, weight, eps)
