"""MLA decode attention over a paged latent cache, absorbed form, in plain fp32 torch: the truth.

With the up-projections absorbed, every head attends over the same cached rows [c | k_rope] (c = the normalised
512-dim latent, k_rope the 64-dim shared key part; K3 is NoPE, so nothing is rotated):
    q_h     = [q_nope_h @ W_kc_h | q_rope_h]                  (absorbed query, 512 + 64)
    s_h,t   = <q_h, cache_t> * scale,  scale = (nope + rope)^-0.5 = 192^-0.5 for K3
    out_h   = sum_t softmax_t(s_h) * c_t                      (still latent: W_vc is applied by the caller)
A request with no cached tokens yields zeros. mla_attention_reference is the same attention before absorption
(keys and values up-projected from every cached latent), causal over a span of queries: the model's reference tier.

Cache layout: kv_cache [num_pages, page_size, kv_lora_rank + rope]; token t of request n sits in page
page_table[n, t // page_size] at slot t % page_size. Entries of page_table past a request's pages are ignored.
"""

from __future__ import annotations

import torch


def gather_tokens(kv_cache: torch.Tensor, page_table: torch.Tensor, length: int) -> torch.Tensor:
    """The first `length` cached rows of each request, [N, length, kv_lora_rank + rope] in token order, for a page
    table [N, max_pages]. Entries past a request's pages may hold anything (e.g. -1): they are clamped to a valid page,
    whose rows a caller with shorter requests masks."""
    page_size = kv_cache.shape[1]
    num_pages = -(-length // page_size)
    pages = page_table[:, :num_pages].long().clamp(0, kv_cache.shape[0] - 1)
    return kv_cache[pages].reshape(page_table.shape[0], num_pages * page_size, kv_cache.shape[2])[:, :length]


def gather_request_tokens(kv_cache: torch.Tensor, page_table: torch.Tensor, request: int, length: int) -> torch.Tensor:
    """The `length` cached rows [length, kv_lora_rank + rope] of one request, in token order."""
    return gather_tokens(kv_cache, page_table[request : request + 1], length)[0]


def mla_decode_reference(q, kv_cache, page_table, seq_lens, kv_lora_rank: int, scale: float) -> torch.Tensor:
    """Arguments as in `dayone.kernels.mla_decode.mla_decode`: q [N, H, kv_lora_rank + rope] -> out
    [N, H, kv_lora_rank] in q's dtype; one request at a time, fp32."""
    num_requests, num_heads, _ = q.shape
    out = torch.zeros(num_requests, num_heads, kv_lora_rank)
    for n in range(num_requests):
        length = int(seq_lens[n])
        if length == 0:
            continue
        rows = gather_request_tokens(kv_cache, page_table, n, length).float()  # [L, kv_lora_rank + rope]
        scores = (q[n].float() @ rows.T) * scale  # [H, L]
        out[n] = torch.softmax(scores, dim=-1) @ rows[:, :kv_lora_rank]
    return out.to(q.dtype)


def mla_attention_reference(
    q: torch.Tensor,
    latents: torch.Tensor,
    kv_b: torch.Tensor,
    kv_lora_rank: int,
    v_head_dim: int,
    scale: float,
    past: int = 0,
) -> torch.Tensor:
    """Causal MLA attention of one request with the plain (not absorbed) up-projection, fp32: the prefill truth.

    q [n, H, nope + rope] are the queries of positions past .. past + n - 1; latents [t, kv_lora_rank + rope] the
    cached rows [c | k_rope] of positions 0 .. t - 1 (t >= past + n); kv_b [H * (nope + v), kv_lora_rank] the
    up-projection. Each head's keys are [c W_k_h | k_rope] (k_rope shared by all heads) and its values c W_v_h;
    query i sees keys 0 .. past + i. Returns [n, H, v] in q's dtype (no output projection).
    """
    n, num_heads, qk_dim = q.shape
    rope = latents.shape[-1] - kv_lora_rank
    nope = qk_dim - rope
    c, k_rope = latents.float().split([kv_lora_rank, rope], dim=-1)
    kv = (c @ kv_b.float().T).view(-1, num_heads, nope + v_head_dim)  # [t, H, nope + v]
    k_nope, v = kv.split([nope, v_head_dim], dim=-1)
    k = torch.cat([k_nope, k_rope[:, None, :].expand(-1, num_heads, -1)], dim=-1)  # [t, H, nope + rope]
    scores = torch.einsum("nhd,thd->hnt", q.float(), k) * scale
    visible = torch.arange(k.shape[0])[None, :] <= past + torch.arange(n)[:, None]  # [n, t]
    scores = scores.masked_fill(~visible.to(scores.device), float("-inf"))
    return torch.einsum("hnt,thv->nhv", scores.softmax(-1), v).to(q.dtype)
