"""Named intermediate tensors of a forward pass, for comparing tiers point by point.

Capture points, named in dayone.core.vocabulary (EMBED, LAYER_POINTS, HEAD_POINTS; tests/model/test_k3.py checks
that the model records those and no others), tokens packed over the batch, [N, ...] with N = total new tokens,
request after request:
    embed                      [N, D]       token embeddings
    layers.{i}.attn_res        [N, D]       attention-residual aggregate before input_layernorm (attention residuals)
    layers.{i}.attn_in         [N, D]       input_layernorm output
    layers.{i}.attn_out        [N, D]       attention (KDA or MLA) output after o_proj
    layers.{i}.mlp_res         [N, D]       aggregate before post_attention_layernorm (attention residuals)
    layers.{i}.mlp_in          [N, D]       post_attention_layernorm output
    layers.{i}.router_logits   [N, E]       fp32 router logits
    layers.{i}.topk_ids        [N, k]       experts used (sorted ascending per token; the replayed ones under replay)
    layers.{i}.own_topk_ids    [N, k]       the router's own choice (equal to topk_ids unless routes are replayed)
    layers.{i}.topk_weights    [N, k]       their weights (same order)
    layers.{i}.latent_down     [N, L]       routed_expert_down_proj output (latent MoE)
    layers.{i}.latent_combined [N, L]       router-weighted sum of expert outputs (fp32)
    layers.{i}.latent_normed   [N, L]       after routed_expert_norm
    layers.{i}.latent_up       [N, D]       routed_expert_up_proj output
    layers.{i}.mlp_out         [N, D]       FFN (dense MLP or MoE incl. shared experts) output
    layers.{i}.out             [N, D]       the residual stream after the layer (attention residuals: the prefix)
    output_res                 [N, D]       final aggregate (attention residuals)
    final_norm                 [N, D]
    logits                     [N, vocab]
"""

from __future__ import annotations

from fnmatch import fnmatchcase

import torch


class Capture(dict):
    """A dict name -> tensor filled by `forward(..., capture=cap)`; records only names matching `patterns`
    (fnmatch globs, e.g. "layers.*.attn_out"); no patterns records every point.

    routes (routing replay): "layers.{i}.topk_ids" -> [N, k] experts to use instead of the router's own choice
    (the weights still come from this model's scores). Comparing two tiers with the routes of one of them keeps
    a near-tie in the router, which bf16 rounding can flip, from hiding the numerical difference of the rest.
    """

    def __init__(self, *patterns: str, routes: dict[str, torch.Tensor] | None = None) -> None:
        super().__init__()
        self.patterns = patterns
        self.routes = routes or {}

    def wants(self, name: str) -> bool:
        return not self.patterns or any(fnmatchcase(name, p) for p in self.patterns)

    def record(self, name: str, value: torch.Tensor) -> None:
        if self.wants(name):
            self[name] = value.detach().clone()


def record(capture: Capture | None, name: str, value: torch.Tensor) -> None:
    if capture is not None:
        capture.record(name, value)


def replayed_route(capture: Capture | None, name: str) -> torch.Tensor | None:
    return capture.routes.get(name) if capture is not None else None


def wants(capture: Capture | None, name: str) -> bool:
    return capture is not None and capture.wants(name)
