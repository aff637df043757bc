"""The public op of dayone.kernels.mla_decode: mla_decode; the Triton kernel for CUDA tensors, the torch counterpart for
CPU ones (dayone.kernels.dispatch)."""

from __future__ import annotations

import os

import torch
from dayone.kernels.dispatch import use_triton
from dayone.kernels.mla_decode.batched import mla_decode_batched


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
