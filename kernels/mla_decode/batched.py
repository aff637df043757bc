"""MLA decode for CPU tensors: the reference's math for all requests at once (padded to the longest, masked)."""

from __future__ import annotations

import torch
from dayone.kernels.mla_decode.reference import gather_tokens


def mla_decode_batched(q, kv_cache, page_table, seq_lens, kv_lora_rank: int, scale: float) -> torch.Tensor:
    """Arguments as in `dayone.kernels.mla_decode.mla_decode`: q [N, H, kv_lora_rank + rope] -> out
    [N, H, kv_lora_rank] in q's dtype, fp32 math; see reference.py."""
    num_requests, num_heads, _ = q.shape
    max_len = int(seq_lens.max()) if num_requests else 0
    if max_len == 0:
        return q.new_zeros(num_requests, num_heads, kv_lora_rank)
    rows = gather_tokens(kv_cache, page_table, max_len).float()  # [N, max_len, kv_lora_rank + rope]
    scores = torch.einsum("nhd,ntd->nht", q.float(), rows) * scale
    valid = torch.arange(max_len, device=q.device)[None, :] < seq_lens[:, None].to(q.device)
    scores = scores.masked_fill(~valid[:, None, :], float("-inf"))
    probs = torch.softmax(scores, dim=-1).nan_to_num(0.0)  # an empty request is all -inf: NaN -> 0
    # rounded to the cache's dtype before they meet the values, fp32 sums: the precision of the kernel's second dot
    # (which rounds exp(s - running max) before normalising, so not the same values); the fast tier's absorbed form
    # that this op replaced rounded them so too (f253285)
    probs = probs.to(kv_cache.dtype).float()
    return torch.einsum("nht,ntc->nhc", probs, rows[..., :kv_lora_rank]).to(q.dtype)
