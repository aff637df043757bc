"""Triton kernel: attention-residual aggregation fused with the side's RMSNorm, one token per program.

Each row is read once: the softmax runs online over at most attn_res_max_rows rows (9 for K3), keeping a running
max, a running denominator and the rescaled fp32 sum of raw rows.
"""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def _score(row, w_comb, D, score_eps):
    """<row * rsqrt(mean(row^2) + eps), w_comb> without materialising the normalised row."""
    return tl.sum(row * w_comb, axis=0) / tl.sqrt(tl.sum(row * row, axis=0) / D + score_eps)


@triton.jit
def attn_res_kernel(
    bank_ptr,  # [T, n, D] at any token/row strides, unit stride along D
    prefix_ptr,  # [T, D], unit stride along D
    w_comb_ptr,  # [D] norm_w * proj_w[0]
    norm_ptr,  # [D] the side's RMSNorm weight
    out_ptr,  # [T, D] contiguous
    mixed_ptr,  # [T, D] fp32 contiguous (written only when STORE_MIXED)
    n_rows,  # n, the bank rows (0 .. attn_res_max_rows - 1)
    D,
    stride_bt,
    stride_bn,
    stride_pt,
    eps,
    score_eps,
    STORE_MIXED: tl.constexpr,
    BLOCK_D: tl.constexpr,  # >= D: norms need the whole row
):
    t = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    w_comb = tl.load(w_comb_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    # start the online softmax from the prefix row, which always exists
    acc = tl.load(prefix_ptr + t * stride_pt + cols, mask=mask, other=0.0).to(tl.float32)
    running_max = _score(acc, w_comb, D, score_eps)
    denom = tl.full((), 1.0, tl.float32)  # a tensor from the start: loop-carried types must not change
    for i in range(n_rows):
        row = tl.load(bank_ptr + t * stride_bt + i * stride_bn + cols, mask=mask, other=0.0).to(tl.float32)
        s = _score(row, w_comb, D, score_eps)
        new_max = tl.maximum(running_max, s)
        keep = tl.exp(running_max - new_max)
        p = tl.exp(s - new_max)
        acc = acc * keep + p * row
        denom = denom * keep + p
        running_max = new_max
    mixed = acc / denom
    if STORE_MIXED:
        tl.store(mixed_ptr + t * D + cols, mixed, mask=mask)
    rstd = 1.0 / tl.sqrt(tl.sum(mixed * mixed, axis=0) / D + eps)
    out = mixed * rstd * tl.load(norm_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + t * D + cols, out.to(out_ptr.dtype.element_ty), mask=mask)


def launch(bank, prefix, w_comb, norm_weight, out, mixed, eps: float, score_eps: float, num_warps: int = 8) -> None:
    """bank [T, n, D], prefix [T, D], w_comb/norm_weight [D], out [T, D], mixed [T, D] fp32 or None."""
    t, n, d = bank.shape
    store_mixed = mixed is not None
    attn_res_kernel[(t,)](
        bank, prefix, w_comb, norm_weight, out, mixed if store_mixed else out, n, d,
        bank.stride(0), bank.stride(1), prefix.stride(0), eps, score_eps,
        STORE_MIXED=store_mixed, BLOCK_D=triton.next_power_of_2(d), num_warps=num_warps,
        enable_fp_fusion=True,
    )  # fmt: skip
