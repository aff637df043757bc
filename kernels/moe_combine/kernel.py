"""Triton kernel: weighted sum of the top-k expert outputs and the optional latent RMSNorm, one token per program."""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def moe_combine_kernel(
    expert_ptr,  # [T, k, L], unit stride along L
    weight_ptr,  # [T, k] router weights
    norm_ptr,  # [L] RMSNorm weight (unused when not HAS_NORM)
    out_ptr,  # [T, L] contiguous
    L,
    stride_et,
    stride_ek,
    stride_wt,
    eps,
    TOP_K: tl.constexpr,
    HAS_NORM: tl.constexpr,
    BLOCK_L: tl.constexpr,  # >= L: the norm needs the whole row, and a latent row (3584) fits in registers
):
    t = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_L)
    mask = cols < L
    acc = tl.zeros((BLOCK_L,), dtype=tl.float32)
    # A loop, not static_range: unrolled, the compiler issues all TOP_K row loads up front and holds them, which at
    # K3 (16 rows of 4096) needs 255 registers and spills on sm_100 (ptxas -v); the loop needs 56-62 and spills nothing
    for j in tl.range(TOP_K):
        w = tl.load(weight_ptr + t * stride_wt + j).to(tl.float32)
        row = tl.load(expert_ptr + t * stride_et + j * stride_ek + cols, mask=mask, other=0.0).to(tl.float32)
        acc += w * row
    if HAS_NORM:
        rstd = 1.0 / tl.sqrt(tl.sum(acc * acc, axis=0) / L + eps)
        acc = acc * rstd * tl.load(norm_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + t * L + cols, acc.to(out_ptr.dtype.element_ty), mask=mask)


def launch(expert_out, weights, norm_weight, out, eps: float, num_warps: int = 8) -> None:
    """expert_out [T, k, L], weights [T, k], norm_weight [L] or None, out [T, L]."""
    t, k, width = expert_out.shape
    has_norm = norm_weight is not None
    moe_combine_kernel[(t,)](
        expert_out, weights, norm_weight if has_norm else weights, out, width,
        expert_out.stride(0), expert_out.stride(1), weights.stride(0), eps,
        TOP_K=k, HAS_NORM=has_norm, BLOCK_L=triton.next_power_of_2(width), num_warps=num_warps,
        enable_fp_fusion=True,
    )  # fmt: skip
