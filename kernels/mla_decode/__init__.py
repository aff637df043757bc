"""MLA decode attention (absorbed up-projections) over a paged latent cache."""

from __future__ import annotations

import os
from functools import partial

import torch
from dayone.kernels.autotune import DECODE_BATCH, DECODE_CONTEXT, TORCH_DTYPES, Candidate, Inputs, LaunchArgs, variants
from dayone.kernels.dispatch import use_triton
from dayone.kernels.mla_decode.batched import mla_decode_batched
from dayone.kernels.mla_decode.reference import mla_decode_reference
from dayone.kernels.specialization import KernelDims, Specialization

__all__ = ["candidates", "mla_decode", "mla_decode_reference", "specializations"]


def mla_decode(
    q: torch.Tensor,
    kv_cache: torch.Tensor,
    page_table: torch.Tensor,
    seq_lens: torch.Tensor,
    kv_lora_rank: int,
    scale: float,
    *,
    backend: str | None = None,
) -> torch.Tensor:
    """One decode step of absorbed MLA: softmax over each request's cached tokens, output in latent space.

    Args:
        q: absorbed queries [N, H, kv_lora_rank + rope] = [q_nope_h @ W_kc_h | q_rope_h] (K3: 96 heads, 512 + 64).
        kv_cache: [num_pages, page_size, kv_lora_rank + rope] rows [kv_a_layernorm(c) | k_rope], unit last stride.
        page_table: [N, max_pages] int32 page ids of each request in token order (entries past its pages ignored).
        seq_lens: [N] int32 cached tokens per request, the current token included; 0 gives zeros.
        kv_lora_rank: the latent width (512 for K3); the rest of the last dim is the shared rope/NoPE part.
        scale: softmax scale, (qk_nope_head_dim + qk_rope_head_dim)^-0.5 = 192^-0.5 for K3.
        backend: None (CUDA -> Triton, CPU -> torch), "triton" or "torch".
    Returns:
        [N, H, kv_lora_rank] in q's dtype; the caller applies W_vc (absorbed value projection) and o_proj.
    """
    triton = use_triton(q, backend, "mla_decode")
    if q.shape[-1] != kv_cache.shape[-1] or not 0 < kv_lora_rank < q.shape[-1]:
        raise ValueError(
            f"mla_decode: q {tuple(q.shape)}, kv_cache {tuple(kv_cache.shape)}, kv_lora_rank {kv_lora_rank}"
        )
    if page_table.shape[0] != q.shape[0] or seq_lens.shape != (q.shape[0],):
        raise ValueError(f"mla_decode: page_table {tuple(page_table.shape)} / seq_lens {tuple(seq_lens.shape)}")
    if not triton:
        return mla_decode_batched(q, kv_cache, page_table, seq_lens, kv_lora_rank, scale)
    from dayone.kernels.mla_decode.kernel import launch

    if not 0 < kv_lora_rank < q.shape[-1]:
        raise ValueError(f"mla_decode: kv_lora_rank {kv_lora_rank} must leave a rope part in q's {q.shape[-1]}")
    q = q if q.stride(-1) == 1 else q.contiguous()
    interpreting = os.environ.get("TRITON_INTERPRET") == "1"
    # The interpreter's fp32->bf16 cast truncates instead of rounding to nearest (triton 3.9), so under it the
    # kernel stores fp32 and torch rounds; on a GPU the kernel stores q's dtype itself.
    out = torch.empty(*q.shape[:2], kv_lora_rank, dtype=torch.float32 if interpreting else q.dtype, device=q.device)
    if q.shape[0]:
        launch(
            q, kv_cache, page_table.to(torch.int32), seq_lens.to(torch.int32), out, float(scale), kv_lora_rank,
            interpreting or q.dtype == torch.float32,
        )  # fmt: skip
    return out.to(q.dtype)


def specializations(dims: KernelDims) -> list[Specialization]:
    """One instance per MLA geometry (latent and rope widths are constexprs; heads and page size are runtime)."""
    if dims.mla_num_heads == 0 or dims.kv_lora_rank == 0:
        return []
    from dayone.kernels.mla_decode.kernel import dot_block, mla_decode_kernel

    act = "*" + dims.dtype
    ints = ["H", "page_size", "stride_qn", "stride_qh", "stride_cache_page", "stride_cache_token"]
    ints += ["stride_page_table", "stride_on", "stride_oh"]
    return [
        Specialization(
            kernel="mla_decode",
            fn=mla_decode_kernel,
            signature={"q_ptr": act, "cache_ptr": act, "page_table_ptr": "*i32", "seq_lens_ptr": "*i32", "out_ptr": act}
            | dict.fromkeys(ints, "i32")
            | {"scale": "fp32"}
            | dict.fromkeys(
                ["KV_LORA", "ROPE", "BLOCK_LAT", "BLOCK_ROPE", "BLOCK_H", "BLOCK_T", "DOT_FP32"], "constexpr"
            ),
            constexprs={
                "KV_LORA": dims.kv_lora_rank,
                "ROPE": dims.qk_rope_head_dim,
                "BLOCK_LAT": dot_block(dims.kv_lora_rank),
                "BLOCK_ROPE": dot_block(dims.qk_rope_head_dim),
                "BLOCK_H": 16,
                "BLOCK_T": 32,
                "DOT_FP32": False,
            },
            num_warps=8,
            num_stages=2,
        )
    ]


# Autotuning alternatives (heads per program, tokens per step, warps) to the shipped BLOCK_H=16 BLOCK_T=32 8 warps;
# at K3's 512 + 64 every one fits sm_90 without spills (at most 132 KiB of shared memory: 32 heads x 64 tokens).
CONFIGS = (
    {"BLOCK_T": 16, "num_warps": 4}, {"num_warps": 4}, {"BLOCK_T": 64}, {"BLOCK_H": 32},
    {"BLOCK_H": 32, "num_warps": 4}, {"BLOCK_H": 32, "BLOCK_T": 64}, {"BLOCK_H": 64},
)  # fmt: skip
PAGE_SIZE = 64


def candidates(dims: KernelDims) -> list[Candidate]:
    """The decode kernel at batch 64, 8k tokens of context each."""
    return [
        Candidate(variants(default, CONFIGS), partial(decode_args, dims), ("out_ptr",))
        for default in specializations(dims)
    ]


def decode_args(dims: KernelDims, device: str, tiny: bool = False) -> LaunchArgs:
    """64 requests of 8192 cached tokens, pages shuffled over the pool, page size 64, the spec's heads and widths.

    tiny: 3 requests of 70, 1 and 0 tokens, 5 heads, latent 32 + rope 16, page size 16, fp32.
    """
    import triton
    from dayone.kernels.mla_decode.kernel import dot_block

    if tiny:
        lens, heads, lat, rope, page, dtype = [70, 1, 0], 5, 32, 16, 16, torch.float32
    else:
        lens, heads, lat, rope = (
            [DECODE_CONTEXT] * DECODE_BATCH,
            dims.mla_num_heads,
            dims.kv_lora_rank,
            dims.qk_rope_head_dim,
        )
        page, dtype = PAGE_SIZE, TORCH_DTYPES[dims.dtype]
    x = Inputs(device)
    n, pages = len(lens), triton.cdiv(max(lens), page)
    cache = x.randn(n * pages, page, lat + rope, dtype=dtype)
    table = x.randperm(n * pages).to(torch.int32).reshape(n, pages)
    q = x.randn(n, heads, lat + rope, dtype=dtype)
    out = x.nans(n, heads, lat, dtype=dtype)
    scale = (dims.qk_nope_head_dim + dims.qk_rope_head_dim) ** -0.5
    args = (q, cache, table, x.tensor(lens), out, heads, page, q.stride(0), q.stride(1), cache.stride(0))
    args += (cache.stride(1), table.stride(0), out.stride(0), out.stride(1), scale)
    grid = lambda meta: (triton.cdiv(heads, meta["BLOCK_H"]), n)
    shapes = {
        "KV_LORA": lat,
        "ROPE": rope,
        "BLOCK_LAT": dot_block(lat),
        "BLOCK_ROPE": dot_block(rope),
        "DOT_FP32": True,
    }
    return grid, args, shapes if tiny else {}
