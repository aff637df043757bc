"""Attention-residual aggregation in plain fp32 torch: the truth the kernel is compared to.

Kimi K3 keeps no plain residual stream. Each side (attention input, MLP input, final output) mixes the rows
R = [bank_0 .. bank_{n-1}, prefix] of every token with a learned softmax:
    x_i   = R_i * rsqrt(mean(R_i^2) + eps)          (weightless RMSNorm, only used for the score)
    s_i   = <x_i, w_comb>,  w_comb = norm_w * proj_w[0]   (precomputed; recompute after every weight update)
    mixed = sum_i softmax(s)_i * R_i                (the RAW rows, fp32)
    out   = RMSNorm(mixed; side_norm_w, eps)        (input_layernorm / post_attention_layernorm / norm)
The model consumes `out`; `mixed` is returned too for inspection and tests.
"""

from __future__ import annotations

import torch


def combined_score_weight(res_norm_weight: torch.Tensor, res_proj_weight: torch.Tensor) -> torch.Tensor:
    """w_comb [D] fp32 from `*_res_norm.weight` [D] and `*_res_proj.weight` [1, D]."""
    return res_norm_weight.float() * res_proj_weight.float()[0]


def attn_res_aggregate_reference(
    bank: torch.Tensor,
    prefix: torch.Tensor,
    w_comb: torch.Tensor,
    norm_weight: torch.Tensor,
    eps: float = 1e-5,
    score_eps: float | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """bank [T, n, D] (n may be 0), prefix [T, D] -> (out [T, D] in prefix's dtype, mixed [T, D] fp32).

    score_eps is the weightless norm's epsilon; None means the same as eps.
    """
    score_eps = eps if score_eps is None else score_eps
    rows = torch.cat([bank.float(), prefix.float()[:, None, :]], dim=1)  # [T, n+1, D]
    normed = rows * torch.rsqrt(rows.pow(2).mean(-1, keepdim=True) + score_eps)
    scores = normed @ w_comb.float()  # [T, n+1]
    probs = torch.softmax(scores, dim=-1)
    mixed = (probs[..., None] * rows).sum(dim=1)
    out = mixed * torch.rsqrt(mixed.pow(2).mean(-1, keepdim=True) + eps) * norm_weight.float()
    return out.to(prefix.dtype), mixed
