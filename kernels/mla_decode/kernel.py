"""Triton kernel: absorbed MLA decode over a paged latent cache (flash-decoding style online softmax).

All heads share the cached rows (MQA in latent space), so one program takes BLOCK_H heads of one request and
reads each cached row once for all of them: the latent tile serves as key (with the rope part) and as value.
"""

from __future__ import annotations

import triton
import triton.language as tl
from dayone.spec.kernel_limits import tile_width  # a power of two, at least tl.dot's 16; the spec limits use it too


@triton.jit
def _dot(a, b, DOT_FP32: tl.constexpr):
    """tl.dot on 16-bit tiles, or on fp32 tiles at full precision (no tf32) for fp32 inputs and the interpreter."""
    if DOT_FP32:
        return tl.dot(a.to(tl.float32), b.to(tl.float32), input_precision="ieee")
    else:
        return tl.dot(a, b)


@triton.jit
def mla_decode_kernel(
    q_ptr,  # [N, H, KV_LORA + ROPE]
    cache_ptr,  # [num_pages, page_size, KV_LORA + ROPE]
    page_table_ptr,  # [N, max_pages] int32
    seq_lens_ptr,  # [N] int32
    out_ptr,  # [N, H, KV_LORA]
    H,
    page_size,
    stride_qn,
    stride_qh,
    stride_cache_page,
    stride_cache_token,
    stride_page_table,
    stride_on,
    stride_oh,
    scale,
    KV_LORA: tl.constexpr,
    ROPE: tl.constexpr,
    BLOCK_LAT: tl.constexpr,  # KV_LORA rounded up to a power of two, at least 16 (tl.dot's smallest K)
    BLOCK_ROPE: tl.constexpr,  # likewise for ROPE; the padding columns load as 0 and add nothing to the scores
    BLOCK_H: tl.constexpr,
    BLOCK_T: tl.constexpr,  # tokens per step; independent of page_size (each token looks up its own page)
    DOT_FP32: tl.constexpr,  # fp32 tiles into tl.dot: the interpreter (bf16 dots are wrong there) and fp32 inputs
):
    # head blocks on the fastest grid axis: the programs sharing a request run together and share its rows in L2
    heads = tl.program_id(0) * BLOCK_H + tl.arange(0, BLOCK_H)
    n = tl.program_id(1)
    head_mask = heads < H
    lat = tl.arange(0, BLOCK_LAT)
    rope = tl.arange(0, BLOCK_ROPE)
    lat_mask = lat < KV_LORA
    rope_mask = rope < ROPE
    seq_len = tl.load(seq_lens_ptr + n)

    q_rows = q_ptr + n.to(tl.int64) * stride_qn + heads[:, None] * stride_qh
    q_lat = tl.load(
        q_rows + lat[None, :], mask=head_mask[:, None] & lat_mask[None, :], other=0.0
    )  # [BLOCK_H, BLOCK_LAT]
    q_rope = tl.load(q_rows + KV_LORA + rope[None, :], mask=head_mask[:, None] & rope_mask[None, :], other=0.0)
    if DOT_FP32:  # once here rather than in every step's _dot
        q_lat = q_lat.to(tl.float32)
        q_rope = q_rope.to(tl.float32)

    running_max = tl.full((BLOCK_H,), float("-inf"), tl.float32)
    denom = tl.zeros((BLOCK_H,), tl.float32)
    acc = tl.zeros((BLOCK_H, BLOCK_LAT), tl.float32)
    for start in range(0, seq_len, BLOCK_T):
        tokens = start + tl.arange(0, BLOCK_T)
        token_mask = tokens < seq_len
        page = tl.load(page_table_ptr + n * stride_page_table + tokens // page_size, mask=token_mask, other=0)
        rows = cache_ptr + page.to(tl.int64) * stride_cache_page + (tokens % page_size) * stride_cache_token
        k_lat = tl.load(rows[:, None] + lat[None, :], mask=token_mask[:, None] & lat_mask[None, :], other=0.0)
        k_rope = tl.load(
            rows[:, None] + KV_LORA + rope[None, :], mask=token_mask[:, None] & rope_mask[None, :], other=0.0
        )
        scores = _dot(q_lat, tl.trans(k_lat), DOT_FP32) + _dot(q_rope, tl.trans(k_rope), DOT_FP32)  # [BLOCK_H, BLOCK_T]
        scores = tl.where(token_mask[None, :], scores * scale, float("-inf"))
        new_max = tl.maximum(running_max, tl.max(scores, axis=1))  # finite: every step has a valid token
        keep = tl.exp(running_max - new_max)
        p = tl.exp(scores - new_max[:, None])
        denom = denom * keep + tl.sum(p, axis=1)
        acc = acc * keep[:, None] + _dot(p.to(k_lat.dtype), k_lat, DOT_FP32)
        running_max = new_max
    # a request with no tokens never enters the loop: acc = 0, and 0 / 1 keeps it 0
    out = acc / tl.where(denom == 0.0, 1.0, denom)[:, None]
    out_rows = out_ptr + n.to(tl.int64) * stride_on + heads[:, None] * stride_oh
    tl.store(out_rows + lat[None, :], out.to(out_ptr.dtype.element_ty), mask=head_mask[:, None] & lat_mask[None, :])


def launch(
    q, kv_cache, page_table, seq_lens, out, scale: float, kv_lora_rank: int, dot_fp32: bool,
    block_h: int = 16, block_t: int = 32, num_warps: int = 8,
) -> None:  # fmt: skip
    """q [N, H, KV_LORA + ROPE], kv_cache [P, page, KV_LORA + ROPE], page_table [N, max_pages], seq_lens [N]."""
    num_requests, num_heads, width = q.shape
    grid = (triton.cdiv(num_heads, block_h), num_requests)
    mla_decode_kernel[grid](
        q, kv_cache, page_table, seq_lens, out, num_heads, kv_cache.shape[1],
        q.stride(0), q.stride(1), kv_cache.stride(0), kv_cache.stride(1), page_table.stride(0),
        out.stride(0), out.stride(1), scale,
        KV_LORA=kv_lora_rank, ROPE=width - kv_lora_rank, BLOCK_LAT=tile_width(kv_lora_rank),
        BLOCK_ROPE=tile_width(width - kv_lora_rank), BLOCK_H=block_h, BLOCK_T=block_t, DOT_FP32=dot_fp32,
        num_warps=num_warps, enable_fp_fusion=True,
    )  # fmt: skip
