"""Kimi Delta Attention as a layer: projections, short convs, gates, the delta-rule recurrence, gated o_norm.

Per token (x = the layer's normalized input), H heads of K = V = head_dim:
    q, k, v = SiLU(causal depthwise conv(q/k/v_proj(x)))       conv width from the spec, no bias
    q, k    = L2-normalised per head (eps 1e-6); q *= K^-0.5  (as transformers' kimi_linear and fla)
    g       = f_b_proj(f_a_proj(x))                            raw gate [H, K]
    decay   = plain: -exp(A_log[h]) * softplus(g + dt_bias)  |  safe: lower * sigmoid(exp(A_log[h]) * (g + dt_bias))
    beta    = sigmoid(b_proj(x))                               [H]
    S <- diag(exp(decay)) S;  S <- S + beta k (v - S^T k)^T;  o = S^T q
    out     = o_proj(RMSNorm_head(o; o_norm) * sigmoid(output gate(x)))
The reference tier calls each op's reference (`dayone.kernels.<op>.reference`: the conv and the recurrence token
by token in fp32); the fast tier calls the public kernel functions: `short_conv` (packed prefill) / `short_conv_update` (decode), `chunk_kda` / `kda_decode`, and
`gated_rmsnorm`, with the backend its tier's `kernels` switch picks.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from dayone.adapters.model.batch import Batch
from dayone.adapters.model.cache import KDAState
from dayone.adapters.model.capture import Capture
from dayone.adapters.model.config import Tier
from dayone.adapters.model.module import SpecModule
from dayone.kernels.gated_rmsnorm.reference import gated_rmsnorm_reference
from dayone.kernels.kda.reference import prepare_inputs, recurrence
from dayone.kernels.short_conv.reference import conv_sequence
from dayone.spec.schema import ModelSpec

DEFAULT_LOWER_BOUND = -5.0  # the kernels' default; the plain gate has no lower bound and ignores it


class KDA(SpecModule):
    def __init__(self, spec: ModelSpec, tier: Tier, device=None) -> None:
        super().__init__(tier)
        kda = spec.kda
        assert kda is not None
        self.H, self.K, self.W = kda.num_heads, kda.head_dim, kda.conv_kernel_size
        self.gate_kind = kda.gate.kind
        self.lower = kda.gate.lower_bound if kda.gate.lower_bound is not None else DEFAULT_LOWER_BOUND
        self.eps = kda.norm_eps
        D, HK = spec.hidden_size, kda.num_heads * kda.head_dim
        # The KDA ops take the conv weights, o_norm, A_log and dt_bias in fp32, whatever the checkpoint stores.
        fp32 = torch.float32
        for x in ("q", "k", "v"):
            self.add_weight(f"{x}_proj", (HK, D), f"kda.{x}_proj", device)
            self.add_weight(f"{x}_conv", (HK, 1, self.W), f"kda.conv.{x}", device, fp32)
        self.add_weight("f_a_proj", (kda.gate.rank, D), "kda.f_a", device)
        self.add_weight("f_b_proj", (HK, kda.gate.rank), "kda.f_b", device)
        self.add_weight("b_proj", (self.H, D), "kda.b_proj", device)
        self.add_weight("A_log", (self.H,), "kda.a_log", device, fp32)
        self.add_weight("dt_bias", (HK,), "kda.dt_bias", device, fp32)
        self.low_rank_gate = kda.output_gate.kind == "low_rank"
        if self.low_rank_gate:
            self.add_weight("g_a_proj", (kda.output_gate.rank, D), "kda.g_a", device)
            self.add_weight("g_b_proj", (HK, kda.output_gate.rank), "kda.g_b", device)
        else:
            self.add_weight("g_proj", (HK, D), "kda.g_proj", device)
        self.add_weight("o_norm", (self.K,), "kda.o_norm", device, fp32)
        self.add_weight("o_proj", (D, HK), "kda.o_proj", device)

    def new_state(self, batch_size: int, device=None) -> KDAState:
        HK = self.H * self.K
        return KDAState(
            conv=torch.zeros(batch_size, 3 * HK, self.W - 1, dtype=self.tier.dtype, device=device),
            recurrent=torch.zeros(batch_size, self.H, self.K, self.K, dtype=torch.float32, device=device),
        )

    def forward(self, x: torch.Tensor, batch: Batch, state: KDAState | None, capture: Capture | None = None):
        """x [N, D] packed normalized inputs -> [N, D]. state (if given) is read and advanced in place."""
        N = x.shape[0]
        H, K = self.H, self.K
        qkv = torch.cat([F.linear(x, self.q_proj), F.linear(x, self.k_proj), F.linear(x, self.v_proj)], dim=-1)
        conv_w = torch.cat([self.q_conv, self.k_conv, self.v_conv])[:, 0]  # [3HK, W]
        conv = self._reference_conv if self.tier.is_reference else self._fast_conv
        mixed = conv(qkv, conv_w, batch, state)
        q, k, v = (t.reshape(N, H, K) for t in mixed.split(H * K, dim=-1))
        g = F.linear(F.linear(x, self.f_a_proj), self.f_b_proj).view(N, H, K)
        beta_logits = F.linear(x, self.b_proj)  # [N, H]
        if self.tier.is_reference:
            o = self._reference(q, k, v, g, beta_logits, batch, state)
        else:
            o = self._fast(q, k, v, g, beta_logits, batch, state)
        if self.low_rank_gate:
            gate = F.linear(F.linear(x, self.g_a_proj), self.g_b_proj)
        else:
            gate = F.linear(x, self.g_proj)
        if self.tier.is_reference:
            o = gated_rmsnorm_reference(o, gate.view(N, H, K), self.o_norm, self.eps).to(x.dtype)
        else:
            from dayone.kernels.gated_rmsnorm import gated_rmsnorm

            backend = self.tier.backend("gated_rmsnorm", x)
            o = gated_rmsnorm(o.to(x.dtype), gate.view(N, H, K), self.o_norm, self.eps, backend=backend)
        return F.linear(o.reshape(N, H * K), self.o_proj)

    def _reference_conv(self, qkv, conv_w, batch, state):
        """qkv [N, 3HK] packed -> SiLU(conv) [N, 3HK], sequence by sequence through the op's reference; the cache's
        windows [B, 3HK, W-1] read and advanced."""
        mixed = torch.empty_like(qkv)
        for b, s, e in batch.spans():
            window = state.conv[b] if state is not None else qkv.new_zeros(qkv.shape[1], self.W - 1)
            y, window = conv_sequence(qkv[s:e], conv_w, window)
            mixed[s:e] = y.to(qkv.dtype)
            if state is not None:
                state.conv[b] = window.to(state.conv.dtype)
        return mixed

    def _fast_conv(self, qkv, conv_w, batch, state):
        """qkv [N, 3HK] packed -> SiLU(conv) [N, 3HK]; the cache's windows [B, 3HK, W-1] read and advanced."""
        from dayone.kernels.short_conv import short_conv, short_conv_update

        spans = list(batch.spans())
        if not spans:
            return qkv.new_zeros(qkv.shape)
        if state is not None and all(n == 1 for n in batch.seqlens):
            slots = torch.arange(len(batch.seqlens), dtype=torch.int32, device=qkv.device)
            backend = self.tier.backend("short_conv_update", qkv)
            return short_conv_update(qkv, conv_w, state.conv, slots, backend=backend)
        rows = [b for b, _, _ in spans]
        cu = torch.tensor([0] + [e for _, _, e in spans], dtype=torch.int32, device=qkv.device)
        y, final = short_conv(
            qkv[None], conv_w, cu_seqlens=cu, initial_state=state.conv[rows] if state is not None else None,
            output_final_state=state is not None, backend=self.tier.backend("short_conv", qkv),
        )  # fmt: skip
        if state is not None:
            state.conv[rows] = final
        return y[0]

    def _reference(self, q, k, v, g, beta_logits, batch, state):
        """The op's reference, token by token, one sequence at a time (its pieces, which run on any device)."""
        qn, kn, decay, beta = prepare_inputs(
            q, k, g, beta_logits, self.A_log, self.dt_bias, self.gate_kind, self.lower, None, True, True
        )
        o = torch.zeros(v.shape, dtype=torch.float32, device=v.device)
        for b, s, e in batch.spans():
            S0 = state.recurrent[b] if state is not None else v.new_zeros(self.H, self.K, self.K, dtype=torch.float32)
            o[s:e], S = recurrence(qn[s:e], kn[s:e], v[s:e].float(), decay[s:e], beta[s:e], S0.float())
            if state is not None:
                state.recurrent[b] = S
        return o

    def _fast(self, q, k, v, g, beta_logits, batch, state):
        from dayone.kernels.kda import chunk_kda, kda_decode

        gate_args = {"gate": self.gate_kind, "lower_bound": self.lower}
        spans = list(batch.spans())
        if not spans:
            return v.new_zeros(v.shape)
        if state is not None and all(n == 1 for n in batch.seqlens):
            # one new token per request: the decode kernel advances the cache's states in place
            slots = torch.arange(len(batch.seqlens), dtype=torch.int32, device=q.device)
            o = kda_decode(
                q[:, None], k[:, None], v[:, None], g[:, None], beta_logits[:, None], state.recurrent, slots,
                self.A_log, self.dt_bias, **gate_args, backend=self.tier.backend("kda_decode", q),
            )  # fmt: skip
            return o[:, 0]
        rows = [b for b, _, _ in spans]
        cu = torch.tensor([0] + [e for _, _, e in spans], dtype=torch.int32, device=q.device)
        h0 = state.recurrent[rows] if state is not None else None
        o, final = chunk_kda(
            q[None], k[None], v[None], g[None], beta_logits[None], self.A_log, self.dt_bias, **gate_args,
            initial_state=h0, output_final_state=state is not None, cu_seqlens=cu,
            backend=self.tier.backend("chunk_kda", q),
        )  # fmt: skip
        if state is not None:
            state.recurrent[rows] = final
        return o[0]
