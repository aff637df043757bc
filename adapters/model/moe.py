"""Mixture of experts: sigmoid router with correction bias, routed experts (plain or latent), shared experts.

Router (fp32): logits = x W^T; s = sigmoid(logits) (or softmax); top-k on s + correction_bias (within the best
topk_groups of num_groups groups when grouped); weights = the unbiased s of the chosen experts, / (sum + 1e-20) when
renormalising, times scaling_factor.
Plain MoE: y = sum_j w_j expert_j(x) + shared(x).
Latent MoE: h = latent_down(x); y = latent_up(RMSNorm(sum_j w_j expert_j(h))) + shared(x), the sum in fp32.
Reference tier: every (token, expert) pair on its own, MXFP4 experts dequantized and the outputs combined by the
ops' references (kernels/mxfp4/reference.py, kernels/moe_combine/reference.py). Fast tier: tokens sorted by expert,
one matmul per active expert, then the public op `dayone.kernels.moe_combine` (fp32 weighted sum and latent norm).
MXFP4 experts in the fast tier: an expert that sees at most MXFP4_LINEAR_ROWS tokens (decode-shaped) multiplies the
packed bytes directly (`mxfp4_linear`); a busier one is dequantized once (`dequantize_mxfp4`) and runs a plain matmul.
The correction bias is fp32 in both tiers: top-k reads it in fp32, and bf16 would merge near-tied biases.
"""

from __future__ import annotations

from functools import partial

import torch
import torch.nn.functional as F
from dayone.adapters.model.capture import Capture, record, replayed_route, wants
from dayone.adapters.model.config import Tier
from dayone.adapters.model.mlp import MLP, gated_activation
from dayone.adapters.model.module import SpecModule
from dayone.adapters.model.routing import choose_experts, expert_weights, router_scores
from dayone.core.vocabulary import EXPERT_PROJECTIONS, Point, layer_point
from dayone.kernels.moe_combine.reference import moe_combine_reference
from dayone.kernels.mxfp4.reference import dequantize_mxfp4_reference
from dayone.spec.schema import ModelSpec, RouterSpec

MXFP4_LINEAR_ROWS = 16  # the mxfp4_linear kernel's row tile (tl.dot's smallest): one tile covers the decode case


class Router(SpecModule):
    def __init__(self, spec: ModelSpec, tier: Tier, device=None) -> None:
        super().__init__(tier)
        moe = spec.moe
        assert moe is not None
        self.cfg: RouterSpec = moe.router
        self.E, self.k = moe.num_experts, moe.experts_per_token
        self.add_weight("weight", (self.E, spec.hidden_size), "moe.router", device)
        if self.cfg.correction_bias:
            # fp32 whatever the tier or the checkpoint dtype: the routing maths adds it to fp32 scores
            self.add_weight("e_score_correction_bias", (self.E,), "moe.correction_bias", device, torch.float32)

    def forward(self, x: torch.Tensor, replay: torch.Tensor | None = None):
        """x [N, D] -> logits [N, E] fp32, ids [N, k] (ascending), weights [N, k] fp32, own [N, k] (ascending).
        replay: ids [N, k] to use instead of the top-k choice (routing replay); `own` is always this router's choice."""
        logits = F.linear(x.float(), self.weight.float())
        cfg = self.cfg
        scores = router_scores(logits, cfg.activation)
        bias = self.e_score_correction_bias if cfg.correction_bias else None
        own = choose_experts(scores, self.k, bias, cfg.num_groups, cfg.topk_groups)
        ids = own if replay is None else replay.to(logits.device, torch.long).sort(dim=-1).values
        return logits, ids, expert_weights(scores, ids, cfg.renormalize, cfg.scaling_factor), own


class Experts(SpecModule):
    """E gated MLPs of width W (hidden or latent) and intermediate I, stacked: gate/up [E, I, W], down [E, W, I].

    MXFP4 checkpoints: the experts stay packed as the checkpoint stores them (gate_packed [E, I, W/2] u8 and
    gate_scale [E, I, W/32] u8, ...), 4.25 bits per weight, and each expert is dequantized (exactly) when it runs,
    one at a time: a K3 MoE layer is 16 GB packed, 118 GB as fp32. Unquantized checkpoints: stacked float weights.
    """

    PROJECTIONS = EXPERT_PROJECTIONS

    def __init__(self, spec: ModelSpec, tier: Tier, device=None) -> None:
        super().__init__(tier)
        moe = spec.moe
        assert moe is not None
        E, I, W = moe.num_experts, moe.expert_intermediate_size, spec.moe_width
        self.act = spec.activation
        self.num_experts = E
        self.quantized = spec.quantization is not None
        shapes = {"gate": (I, W), "up": (I, W), "down": (W, I)}
        for proj, (rows, cols) in shapes.items():
            if self.quantized:
                group = spec.quantization.group_size  # type: ignore[union-attr]
                self.add_weight(f"{proj}_packed", (E, rows, cols // 2), f"moe.expert.{proj}.packed", device)
                self.add_weight(f"{proj}_scale", (E, rows, cols // group), f"moe.expert.{proj}.scale", device)
            else:
                self.add_weight(proj, (E, rows, cols), f"moe.expert.{proj}", device)

    def weights(self, e: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Expert e's gate [I, W], up [I, W], down [W, I] in the tier's dtype."""
        if not self.quantized:
            return self.gate[e], self.up[e], self.down[e]
        if self.tier.is_reference:
            dequantize = dequantize_mxfp4_reference
        else:
            from dayone.kernels.mxfp4 import dequantize_mxfp4

            backend = self.tier.backend("dequantize_mxfp4", self.gate_packed)
            dequantize = partial(dequantize_mxfp4, backend=backend)
        return tuple(  # type: ignore[return-value]
            dequantize(getattr(self, f"{p}_packed")[e], getattr(self, f"{p}_scale")[e], self.tier.dtype)
            for p in self.PROJECTIONS
        )

    def one_packed(self, e: int, h: torch.Tensor) -> torch.Tensor:
        """Expert e on h [n, W] -> [n, W], its MXFP4 weights read in place (`mxfp4_linear`, fast tier)."""
        from dayone.kernels.mxfp4 import mxfp4_linear

        backend = self.tier.backend("mxfp4_linear", h)

        def linear(x: torch.Tensor, p: str) -> torch.Tensor:
            return mxfp4_linear(x, getattr(self, f"{p}_packed")[e], getattr(self, f"{p}_scale")[e], backend=backend)

        return linear(gated_activation(linear(h, "gate"), linear(h, "up"), self.act, self.tier), "down")

    def one(self, weights: tuple[torch.Tensor, ...], h: torch.Tensor) -> torch.Tensor:
        """One expert (its `weights`) on h [n, W] -> [n, W]."""
        gate, up, down = weights
        act = gated_activation(F.linear(h, gate), F.linear(h, up), self.act, self.tier)
        return F.linear(act, down)

    def forward(self, h: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        """h [N, W], ids [N, k] -> every chosen expert's output [N, k, W] in h's dtype."""
        N, k = ids.shape
        out = h.new_empty(N, k, h.shape[-1])
        if self.tier.is_reference:
            # expert by expert (each dequantized once), then one (token, expert) pair at a time: the same arithmetic
            # whatever the batch, so prefill, decode and a request alone agree to within the fp32 row
            for e in ids.unique().tolist():
                w = self.weights(e)
                for n, j in torch.nonzero(ids == e).tolist():
                    out[n, j] = self.one(w, h[n : n + 1])[0]
            return out
        flat = ids.flatten()
        order = flat.argsort(stable=True)
        counts = torch.bincount(flat, minlength=self.num_experts).tolist()
        out_flat = out.view(N * k, -1)
        start = 0
        for e, count in enumerate(counts):
            if count:
                slots = order[start : start + count]
                rows = h[slots // k]
                if self.quantized and count <= MXFP4_LINEAR_ROWS:
                    out_flat[slots] = self.one_packed(e, rows)
                else:
                    out_flat[slots] = self.one(self.weights(e), rows)
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
        point = partial(layer_point, self.layer)  # point(Point.OUT): "layers.{i}.out"
        logits, ids, weights, own = self.router(x, replayed_route(capture, point(Point.TOPK_IDS)))
        record(capture, point(Point.ROUTER_LOGITS), logits)
        record(capture, point(Point.TOPK_IDS), ids)
        record(capture, point(Point.OWN_TOPK_IDS), own)
        record(capture, point(Point.TOPK_WEIGHTS), weights)
        h = F.linear(x, self.routed_expert_down_proj) if self.latent else x
        record(capture, point(Point.LATENT_DOWN), h)
        expert_out = self.experts(h, ids)  # [N, k, W]
        norm_w = self.routed_expert_norm if self.latent and self.latent_norm else None
        if self.tier.is_reference:
            combine = moe_combine_reference
        else:
            from dayone.kernels.moe_combine import moe_combine

            combine = partial(moe_combine, backend=self.tier.backend("moe_combine", x))
        if wants(capture, point(Point.LATENT_COMBINED)):
            # the op's own fp32 weighted sum (no norm, fp32 in and out): its fused run below keeps the sum in
            # registers and stores only the normed rows
            record(capture, point(Point.LATENT_COMBINED), combine(expert_out.float(), weights))
        routed = combine(expert_out, weights, norm_w, self.eps)
        if self.latent:
            record(capture, point(Point.LATENT_NORMED), routed)
            routed = F.linear(routed, self.routed_expert_up_proj)
            record(capture, point(Point.LATENT_UP), routed)
        if self.shared is not None:
            routed = routed + self.shared(x)
        return routed
