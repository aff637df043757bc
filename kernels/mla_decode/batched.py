"""MLA decode for CPU tensors: the reference's math for all requests at once (padded to the longest, masked)."""

from __future__ import annotations

import torch


def mla_decode_batched(
    q: torch.Tensor,
    kv_cache: torch.Tensor,
    page_table: torch.Tensor,
    seq_lens: torch.Tensor,
    kv_lora_rank: int,
    scale: float,
) -> torch.Tensor:
    """q [N, H, kv_lora_rank + rope] -> out [N, H, kv_lora_rank] in q's dtype, fp32 math; see reference.py."""
    num_requests, num_heads, width = q.shape
    page_size = kv_cache.shape[1]
    max_len = int(seq_lens.max()) if num_requests else 0
    if max_len == 0:
        return q.new_zeros(num_requests, num_heads, kv_lora_rank)
    num_pages = -(-max_len // page_size)
    # unused page-table entries may hold anything (e.g. -1); their tokens are masked, so any valid page will do
    pages = page_table[:, :num_pages].long().clamp(0, kv_cache.shape[0] - 1)
    rows = kv_cache[pages].reshape(num_requests, num_pages * page_size, width)[:, :max_len].float()
    scores = torch.einsum("nhd,ntd->nht", q.float(), rows) * scale
    valid = torch.arange(max_len, device=q.device)[None, :] < seq_lens[:, None].to(q.device)
    scores = scores.masked_fill(~valid[:, None, :], float("-inf"))
    probs = torch.softmax(scores, dim=-1).nan_to_num(0.0)  # an empty request is all -inf: NaN -> 0
    # rounded to the cache's dtype before they meet the values, fp32 sums: the precision of the kernel's second dot
    # (which rounds exp(s - running max) before normalising, so not the same values); the fast tier's absorbed form
    # that this op replaced rounded them so too (f253285)
    probs = probs.to(kv_cache.dtype).float()
    return torch.einsum("nht,ntc->nhc", probs, rows[..., :kv_lora_rank]).to(q.dtype)
