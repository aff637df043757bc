"""MoE combine: weighted sum over the chosen experts' outputs, then (latent MoE) the latent RMSNorm."""

from __future__ import annotations

import os
from functools import partial

import torch
from dayone.kernels.autotune import PREFILL_TOKENS, TORCH_DTYPES, Candidate, Inputs, LaunchArgs, variants
from dayone.kernels.dispatch import use_triton
from dayone.kernels.moe_combine.reference import moe_combine_reference
from dayone.kernels.specialization import KernelDims, Specialization

__all__ = ["candidates", "moe_combine", "specializations"]


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


def specializations(dims: KernelDims) -> list[Specialization]:
    """One instance per model: top-k and the norm are constexprs, the row width a power-of-two block over it."""
    if dims.num_experts == 0:
        return []
    from dayone.kernels.moe_combine.kernel import moe_combine_kernel

    act = "*" + dims.dtype
    width = dims.moe_hidden_size or dims.hidden_size
    block = 1 << (width - 1).bit_length()
    return [
        Specialization(
            kernel="moe_combine",
            fn=moe_combine_kernel,
            signature={"expert_ptr": act, "weight_ptr": "*fp32", "norm_ptr": act, "out_ptr": act, "L": "i32"}
            | {"stride_et": "i32", "stride_ek": "i32", "stride_wt": "i32", "eps": "fp32"}
            | {"TOP_K": "constexpr", "HAS_NORM": "constexpr", "BLOCK_L": "constexpr"},
            constexprs={"TOP_K": dims.experts_per_token, "HAS_NORM": dims.latent_moe, "BLOCK_L": block},
            num_warps=8,
            num_stages=1,
        )
    ]


# Autotuning alternatives to the shipped 8 warps. BLOCK_L is not tuned: the norm needs the whole row in one program.
CONFIGS = ({"num_warps": 4}, {"num_warps": 16})


def candidates(dims: KernelDims) -> list[Candidate]:
    """The combine of a prefill chunk: at decode batch 64 it is 64 programs, too few for a config to matter."""
    return [
        Candidate(variants(spec, CONFIGS), partial(combine_args, dims), ("out_ptr",)) for spec in specializations(dims)
    ]


def combine_args(dims: KernelDims, device: str, tiny: bool = False) -> LaunchArgs:
    """8192 tokens' experts_per_token expert outputs of the MoE width (the latent size for a latent MoE), with the
    norm weight when the spec has a latent norm.

    tiny: 3 tokens of width 40 (BLOCK_L 64), fp32.
    """
    if tiny:
        tokens, width, dtype = 3, 40, torch.float32
    else:
        tokens, width, dtype = PREFILL_TOKENS, dims.moe_hidden_size or dims.hidden_size, TORCH_DTYPES[dims.dtype]
    k = dims.experts_per_token
    x = Inputs(device)
    expert = x.randn(tokens, k, width, dtype=dtype)
    weights = x.randn(tokens, k).softmax(-1)
    norm = x.randn(width, dtype=dtype)
    out = x.nans(tokens, width, dtype=dtype)
    args = (expert, weights, norm, out, width, expert.stride(0), expert.stride(1), weights.stride(0), 1e-5)
    return (tokens,), args, {"BLOCK_L": 64} if tiny else {}
