"""What the compile stage needs from mla_decode: one instance per MLA geometry, its autotuning configs and launch inputs
(dayone.compile_stage imports this module; the public op does not)."""

from __future__ import annotations

from functools import partial

import torch
from dayone.kernels.autotune import DECODE_BATCH, DECODE_CONTEXT, TORCH_DTYPES, Candidate, Inputs, LaunchArgs, variants
from dayone.kernels.specialization import KernelDims, Specialization
from dayone.spec.kernel_limits import tile_width


def specializations(dims: KernelDims) -> list[Specialization]:
    """One instance per MLA geometry (latent and rope widths are constexprs; heads and page size are runtime)."""
    if dims.mla_num_heads == 0 or dims.kv_lora_rank == 0:
        return []
    from dayone.kernels.mla_decode.kernel import mla_decode_kernel

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
                "BLOCK_LAT": tile_width(dims.kv_lora_rank),
                "BLOCK_ROPE": tile_width(dims.qk_rope_head_dim),
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
        "BLOCK_LAT": tile_width(lat),
        "BLOCK_ROPE": tile_width(rope),
        "DOT_FP32": True,
    }
    return grid, args, shapes if tiny else {}
