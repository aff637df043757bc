"""MLA decode attention over a paged latent cache, absorbed form, in plain fp32 torch: the truth.

With the up-projections absorbed, every head attends over the same cached rows [c | k_rope] (c = the normalised
512-dim latent, k_rope the 64-dim shared key part; K3 is NoPE, so nothing is rotated):
    q_h     = [q_nope_h @ W_kc_h | q_rope_h]                  (absorbed query, 512 + 64)
    s_h,t   = <q_h, cache_t> * scale,  scale = (nope + rope)^-0.5 = 192^-0.5 for K3
    out_h   = sum_t softmax_t(s_h) * c_t                      (still latent: W_vc is applied by the caller)
A request with no cached tokens yields zeros.

Cache layout: kv_cache [num_pages, page_size, kv_lora_rank + rope]; token t of request n sits in page
page_table[n, t // page_size] at slot t % page_size. Entries of page_table past a request's pages are ignored.
"""

from __future__ import annotations

import torch


def gather_request_tokens(kv_cache: torch.Tensor, page_table: torch.Tensor, request: int, length: int) -> torch.Tensor:
    """The `length` cached rows [length, kv_lora_rank + rope] of one request, in token order."""
    page_size = kv_cache.shape[1]
    num_pages = -(-length // page_size)
    pages = page_table[request, :num_pages].long()
    return kv_cache[pages].reshape(num_pages * page_size, kv_cache.shape[2])[:length]


def mla_decode_reference(
    q: torch.Tensor,
    kv_cache: torch.Tensor,
    page_table: torch.Tensor,
    seq_lens: torch.Tensor,
    kv_lora_rank: int,
    scale: float,
) -> torch.Tensor:
    """q [N, H, kv_lora_rank + rope] -> out [N, H, kv_lora_rank] in q's dtype; one request at a time, fp32."""
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
