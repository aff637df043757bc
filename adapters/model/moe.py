"""Mixture of experts: sigmoid router with correction bias, routed experts (plain or latent), shared experts.

Router (fp32): logits = x W^T; s = sigmoid(logits) (or softmax); top-k on s + correction_bias (within the best
topk_groups of num_groups groups when grouped); weights = the unbiased s of the chosen experts, / (sum + 1e-20) when
renormalising, times scaling_factor.
Plain MoE: y = sum_j w_j expert_j(x) + shared(x).
Latent MoE: h = latent_down(x); y = latent_up(RMSNorm(sum_j w_j expert_j(h))) + shared(x), the sum in fp32.
Reference tier: every (token, expert) pair on its own. Fast tier: tokens sorted by expert, one matmul per active
expert, then `dayone.kernels.moe_combine` (fp32 weighted sum and latent norm).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from dayone.adapters.model.capture import Capture, record, replayed_route, wants
from dayone.adapters.model.config import Tier
from dayone.adapters.model.mlp import MLP, gated_activation
from dayone.adapters.model.module import SpecModule
from dayone.adapters.model.norms import rms_norm
from dayone.spec.schema import ModelSpec, RouterSpec


class Router(SpecModule):
    def __init__(self, spec: ModelSpec, tier: Tier, device=None) -> None:
        super().__init__(tier)
        moe = spec.moe
        assert moe is not None
        self.cfg: RouterSpec = moe.router
        self.E, self.k = moe.num_experts, moe.experts_per_token
        self.add_weight("weight", (self.E, spec.hidden_size), "moe.router", device)
        if self.cfg.correction_bias:
            self.add_weight("e_score_correction_bias", (self.E,), "moe.correction_bias", device)

    def forward(self, x: torch.Tensor, replay: torch.Tensor | None = None):
        """x [N, D] -> logits [N, E] fp32, ids [N, k] (ascending), weights [N, k] fp32.
        replay: ids [N, k] to use instead of the top-k choice (routing replay)."""
        logits = F.linear(x.float(), self.weight.float())
        scores = logits.sigmoid() if self.cfg.activation == "sigmoid" else logits.softmax(-1)
        choice = scores + self.e_score_correction_bias.float() if self.cfg.correction_bias else scores
        if self.cfg.num_groups > 1:
            # keep the topk_groups groups with the largest sum of their two best scores (DeepSeek noaux_tc)
            grouped = choice.view(-1, self.cfg.num_groups, self.E // self.cfg.num_groups)
            best = grouped.topk(2, dim=-1).values.sum(-1).topk(self.cfg.topk_groups, dim=-1).indices
            keep = torch.zeros_like(grouped[..., 0], dtype=torch.bool).scatter_(1, best, True)
            choice = grouped.masked_fill(~keep[..., None], float("-inf")).view(-1, self.E)
        ids = choice.topk(self.k, dim=-1).indices if replay is None else replay.to(logits.device, torch.long)
        ids = ids.sort(dim=-1).values
        weights = scores.gather(1, ids)
        if self.cfg.renormalize:
            weights = weights / (weights.sum(-1, keepdim=True) + 1e-20)
        return logits, ids, weights * self.cfg.scaling_factor


class Experts(SpecModule):
    """E gated MLPs of width W (hidden or latent) and intermediate I, stacked: gate/up [E, I, W], down [E, W, I]."""

    def __init__(self, spec: ModelSpec, tier: Tier, device=None) -> None:
        super().__init__(tier)
        moe = spec.moe
        assert moe is not None
        E, I, W = moe.num_experts, moe.expert_intermediate_size, spec.moe_width
        self.act = spec.activation
        self.add_weight("gate", (E, I, W), "moe.expert.gate", device)
        self.add_weight("up", (E, I, W), "moe.expert.up", device)
        self.add_weight("down", (E, W, I), "moe.expert.down", device)

    def one(self, e: int, h: torch.Tensor) -> torch.Tensor:
        """Expert e on h [n, W] -> [n, W]."""
        act = gated_activation(F.linear(h, self.gate[e]), F.linear(h, self.up[e]), self.act, self.tier)
        return F.linear(act, self.down[e])

    def forward(self, h: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        """h [N, W], ids [N, k] -> every chosen expert's output [N, k, W] in h's dtype."""
        N, k = ids.shape
        out = h.new_empty(N, k, h.shape[-1])
        if self.tier.is_reference:
            for n in range(N):
                for j in range(k):
                    out[n, j] = self.one(int(ids[n, j]), h[n : n + 1])[0]
            return out
        flat = ids.flatten()
        order = flat.argsort(stable=True)
        counts = torch.bincount(flat, minlength=self.gate.shape[0]).tolist()
        out_flat = out.view(N * k, -1)
        start = 0
        for e, count in enumerate(counts):
            if count:
                slots = order[start : start + count]
                out_flat[slots] = self.one(e, h[slots // k])
                start += count
        return out


class MoE(SpecModule):
    def __init__(self, spec: ModelSpec, layer: int, tier: Tier, device=None) -> None:
        super().__init__(tier)
        moe = spec.moe
        assert moe is not None
        self.layer, self.eps = layer, spec.norm_eps
        self.latent = moe.latent_size is not None
        self.router = Router(spec, tier, device)
        self.experts = Experts(spec, tier, device)
        self.latent_norm = moe.latent_norm
        if self.latent:
            D, L = spec.hidden_size, moe.latent_size
            self.add_weight("routed_expert_down_proj", (L, D), "moe.latent_down", device)
            if moe.latent_norm:
                self.add_weight("routed_expert_norm", (L,), "moe.latent_norm", device)
            self.add_weight("routed_expert_up_proj", (D, L), "moe.latent_up", device)
        self.shared = (
            MLP(spec.hidden_size, moe.shared_intermediate_size, spec.activation, "moe.shared", tier, device)
            if moe.num_shared_experts
            else None
        )

    def forward(self, x: torch.Tensor, capture: Capture | None = None) -> torch.Tensor:
        """x [N, D] (post_attention_layernorm output) -> [N, D]."""
        p = f"layers.{self.layer}."
        logits, ids, weights = self.router(x, replayed_route(capture, p + "topk_ids"))
        record(capture, p + "router_logits", logits)
        record(capture, p + "topk_ids", ids)
        record(capture, p + "topk_weights", weights)
        h = F.linear(x, self.routed_expert_down_proj) if self.latent else x
        record(capture, p + "latent_down", h)
        expert_out = self.experts(h, ids)  # [N, k, W]
        norm_w = self.routed_expert_norm if self.latent and self.latent_norm else None
        if self.tier.is_reference:
            combined = (weights[..., None] * expert_out.float()).sum(1)  # fp32
            record(capture, p + "latent_combined", combined)
            routed = (rms_norm(combined, norm_w, self.eps) if norm_w is not None else combined).to(x.dtype)
        else:
            from dayone.kernels.moe_combine import moe_combine

            if wants(capture, p + "latent_combined"):
                record(capture, p + "latent_combined", (weights[..., None] * expert_out.float()).sum(1))
            routed = moe_combine(expert_out, weights, norm_w, self.eps)
        if self.latent:
            record(capture, p + "latent_normed", routed)
            routed = F.linear(routed, self.routed_expert_up_proj)
            record(capture, p + "latent_up", routed)
        if self.shared is not None:
            routed = routed + self.shared(x)
        return routed
