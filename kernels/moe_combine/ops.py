"""The public op of dayone.kernels.moe_combine: moe_combine; the Triton kernel for CUDA tensors, the torch counterpart
for CPU ones (dayone.kernels.dispatch)."""

from __future__ import annotations

import os

import torch
from dayone.kernels.dispatch import use_triton
from dayone.kernels.moe_combine.reference import moe_combine_reference


def moe_combine(
    expert_out: torch.Tensor,
    weights: torch.Tensor,
    norm_weight: torch.Tensor | None = None,
    eps: float = 1e-5,
    *,
    backend: str | None = None,
) -> torch.Tensor:
    """out = RMSNorm(sum_j weights[:, j] * expert_out[:, j]) with the sum and the norm in fp32.

    Args:
        expert_out: the chosen experts' outputs [T, k, L] (L = the latent size 3584 for K3, hidden for Kimi Linear),
            complete across tensor/expert-parallel ranks.
        weights: router weights [T, k] (any float dtype; read as fp32).
        norm_weight: the latent RMSNorm weight [L] (routed_expert_norm), or None for a plain MoE (no norm).
        eps: RMSNorm epsilon (rms_norm_eps).
        backend: None (CUDA -> Triton, CPU -> torch), "triton" or "torch".
    Returns:
        [T, L] in expert_out's dtype.
    """
    triton = use_triton(expert_out, backend, "moe_combine")
    t, k, width = expert_out.shape
    if weights.shape != (t, k):
        raise ValueError(
            f"moe_combine: weights {tuple(weights.shape)} do not match expert_out {tuple(expert_out.shape)}"
        )
    if norm_weight is not None and norm_weight.shape != (width,):
        raise ValueError(f"moe_combine: norm_weight {tuple(norm_weight.shape)} is not [{width}]")
    if not triton:
        return moe_combine_reference(expert_out, weights, norm_weight, eps)
    from dayone.kernels.moe_combine.kernel import launch

    if expert_out.stride(-1) != 1:
        expert_out = expert_out.contiguous()
    # The interpreter's fp32->bf16 cast truncates instead of rounding to nearest (triton 3.9), so under it the
    # kernel stores fp32 and torch rounds; on a GPU the kernel stores the output dtype itself.
    interpreting = os.environ.get("TRITON_INTERPRET") == "1"
    out = torch.empty(t, width, dtype=torch.float32 if interpreting else expert_out.dtype, device=expert_out.device)
    if t:
        launch(expert_out, weights.contiguous(), None if norm_weight is None else norm_weight.contiguous(), out, eps)
    return out.to(expert_out.dtype)
