"""MoE routing in plain torch: the one statement of how a token picks its experts and weighs them.

The reference tier's Router calls it, and the generated engine packages ship it (their CPU paths route with it), so
the maths lives here only. fp32 throughout: top-k reads the correction bias in fp32, and bf16 would merge near ties.

    scores  = sigmoid(logits) | softmax(logits)                          [N, E]
    choice  = scores + correction_bias                                   (when the router has one)
    grouped = choice restricted to the topk_groups groups (of num_groups) whose two best choices sum highest
              (DeepSeek-V3's group-limited routing)
    ids     = top-k of choice, ascending                                  [N, k]
    weights = the unbiased scores of ids, / (sum + 1e-20) when renormalising, times scaling    [N, k]
"""

from __future__ import annotations

import torch


def router_scores(logits: torch.Tensor, activation: str) -> torch.Tensor:
    """logits [N, E] -> scores [N, E] fp32."""
    logits = logits.float()
    return logits.sigmoid() if activation == "sigmoid" else logits.softmax(-1)


def choose_experts(
    scores: torch.Tensor, k: int, correction_bias: torch.Tensor | None = None, num_groups: int = 1, topk_groups: int = 1
) -> torch.Tensor:
    """scores [N, E] -> the k chosen experts [N, k], ascending."""
    choice = scores + correction_bias.float() if correction_bias is not None else scores
    if num_groups > 1:
        E = choice.shape[-1]
        grouped = choice.view(-1, num_groups, E // num_groups)
        best = grouped.topk(2, dim=-1).values.sum(-1).topk(topk_groups, dim=-1).indices
        keep = torch.zeros_like(grouped[..., 0], dtype=torch.bool).scatter_(1, best, True)
        choice = grouped.masked_fill(~keep[..., None], float("-inf")).view(-1, E)
    return choice.topk(k, dim=-1).indices.sort(dim=-1).values


def expert_weights(scores: torch.Tensor, ids: torch.Tensor, renormalize: bool, scaling: float) -> torch.Tensor:
    """The weights [N, k] fp32 of experts `ids` [N, k] from `scores` [N, E]."""
    weights = scores.gather(1, ids)
    if renormalize:
        weights = weights / (weights.sum(-1, keepdim=True) + 1e-20)
    return weights * scaling
