"""Per-head RMSNorm with sigmoid output gate, fused (KDA's o_norm): o = rmsnorm(x; weight, eps) * sigmoid(gate).

Ladder: reference.py (fp32 truth) -> norm.py (Triton) -> torch_norm.py (CPU fast tier). CUDA tensors run Triton;
CPU tensors run torch unless backend="triton" (interpreter tests).
"""

from __future__ import annotations

import torch
from dayone.kernels.dispatch import use_triton
from dayone.kernels.gated_rmsnorm.norm import BR, gated_rmsnorm_kernel, gated_rmsnorm_triton
from dayone.kernels.gated_rmsnorm.torch_norm import gated_rmsnorm_torch
from dayone.kernels.specialization import KernelDims, Specialization

__all__ = ["gated_rmsnorm", "specializations"]


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


def specializations(dims: KernelDims) -> list[Specialization]:
    """One instance per KDA head dim: bf16 activations, fp32 weight (the checkpoint's o_norm is F32)."""
    if dims.kda_num_heads == 0:
        return []
    act = {"bf16": "*bf16", "fp16": "*fp16", "fp32": "*fp32"}[dims.dtype]
    V = dims.kda_head_dim
    sig = {
        "x": act,
        "gate": act,
        "weight": "*fp32",
        "y": act,
        "R": "i32",
        "eps": "fp32",
        "V": "constexpr",
        "BV": "constexpr",
        "BR": "constexpr",
    }
    bv = 1 << (V - 1).bit_length()
    return [Specialization("gated_rmsnorm", gated_rmsnorm_kernel, sig, {"V": V, "BV": bv, "BR": BR})]
