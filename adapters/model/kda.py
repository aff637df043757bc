"""Kimi Delta Attention as a layer: projections, short convs, gates, the delta-rule recurrence, gated o_norm.

Per token (x = the layer's normalized input), H heads of K = V = head_dim:
    q, k, v = SiLU(causal depthwise conv(q/k/v_proj(x)))       conv width from the spec, no bias
    q, k    = L2-normalised per head (eps 1e-6); q *= K^-0.5  (as transformers' kimi_linear and fla)
    g       = f_b_proj(f_a_proj(x))                            raw gate [H, K]
    decay   = plain: -exp(A_log[h]) * softplus(g + dt_bias)  |  safe: lower * sigmoid(exp(A_log[h]) * (g + dt_bias))
    beta    = sigmoid(b_proj(x))                               [H]
    S <- diag(exp(decay)) S;  S <- S + beta k (v - S^T k)^T;  o = S^T q
    out     = o_proj(RMSNorm_head(o; o_norm) * sigmoid(output gate(x)))
The reference tier runs the conv and the recurrence token by token in fp32; the fast tier calls the kernel
functions: `short_conv` (packed prefill) / `short_conv_update` (decode), `chunk_kda` / `kda_decode`, and
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
from dayone.adapters.model.norms import gated_rms_norm
from dayone.adapters.model.short_conv import causal_depthwise_conv, next_window
from dayone.spec.schema import ModelSpec

L2NORM_EPS = 1e-6


def l2norm(x: torch.Tensor) -> torch.Tensor:
    """x / sqrt(sum(x^2) + 1e-6) over the last dim, fp32 (fla's and transformers' convention)."""
    x = x.float()
    return x / torch.sqrt(x.pow(2).sum(-1, keepdim=True) + L2NORM_EPS)


def log_decay(g: torch.Tensor, A_log: torch.Tensor, dt_bias: torch.Tensor, kind: str, lower: float | None):
    """Per-channel log-decay, fp32. g [T, H, K] raw gate; A_log [H]; dt_bias [H*K]."""
    H, K = g.shape[-2:]
    x = g.float() + dt_bias.float().view(H, K)
    a = A_log.float().exp().view(H, 1)
    if kind == "plain":
        return -a * F.softplus(x)
    return lower * torch.sigmoid(a * x)


def delta_rule(q, k, v, decay, beta, state):
    """Token by token. q, k, decay [T, H, K] (q, k normalised, q scaled); v [T, H, V]; beta [T, H]; state [H, K, V].
    Returns o [T, H, V] and the final state, fp32."""
    S = state.float().clone()
    out = []
    for t in range(q.shape[0]):
        S = S * decay[t].exp()[..., None]
        residual = v[t] - torch.einsum("hk,hkv->hv", k[t], S)
        S = S + beta[t][:, None, None] * k[t][..., None] * residual[:, None, :]
        out.append(torch.einsum("hk,hkv->hv", q[t], S))
    return torch.stack(out), S


class KDA(SpecModule):
    def __init__(self, spec: ModelSpec, tier: Tier, device=None) -> None:
        super().__init__(tier)
        kda = spec.kda
        assert kda is not None
        self.H, self.K, self.W = kda.num_heads, kda.head_dim, kda.conv_kernel_size
        self.gate_kind, self.lower = kda.gate.kind, kda.gate.lower_bound
        self.eps = kda.norm_eps
        D, HK = spec.hidden_size, kda.num_heads * kda.head_dim
        for x in ("q", "k", "v"):
            self.add_weight(f"{x}_proj", (HK, D), f"kda.{x}_proj", device)
            self.add_weight(f"{x}_conv", (HK, 1, self.W), f"kda.conv.{x}", device)
        self.add_weight("f_a_proj", (kda.gate.rank, D), "kda.f_a", device)
        self.add_weight("f_b_proj", (HK, kda.gate.rank), "kda.f_b", device)
        self.add_weight("b_proj", (self.H, D), "kda.b_proj", device)
        self.add_weight("A_log", (self.H,), "kda.a_log", device)  # padding stripped by the loader
        self.add_weight("dt_bias", (HK,), "kda.dt_bias", device)
        self.low_rank_gate = kda.output_gate.kind == "low_rank"
        if self.low_rank_gate:
            self.add_weight("g_a_proj", (kda.output_gate.rank, D), "kda.g_a", device)
            self.add_weight("g_b_proj", (HK, kda.output_gate.rank), "kda.g_b", device)
        else:
            self.add_weight("g_proj", (HK, D), "kda.g_proj", device)
        self.add_weight("o_norm", (self.K,), "kda.o_norm", device)
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
        if self.tier.is_reference:
            mixed = torch.empty_like(qkv)
            for b, s, e in batch.spans():
                window = state.conv[b].T if state is not None else None
                mixed[s:e] = causal_depthwise_conv(qkv[s:e], conv_w, window)
                if state is not None:
                    state.conv[b] = next_window(qkv[s:e], window, self.W).T
        else:
            mixed = self._fast_conv(qkv, conv_w, batch, state)
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
            o = gated_rms_norm(o.to(x.dtype), self.o_norm, gate.view(N, H, K), self.eps)
        else:
            from dayone.kernels.gated_rmsnorm import gated_rmsnorm

            backend = self.tier.backend("gated_rmsnorm", x)
            o = gated_rmsnorm(o.to(x.dtype), gate.view(N, H, K), self.o_norm, self.eps, backend=backend)
        return F.linear(o.reshape(N, H * K), self.o_proj)

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
        qn, kn = l2norm(q) * self.K**-0.5, l2norm(k)
        decay = log_decay(g, self.A_log, self.dt_bias, self.gate_kind, self.lower)
        beta = torch.sigmoid(beta_logits.float())
        o = torch.zeros(q.shape, dtype=torch.float32, device=q.device)
        for b, s, e in batch.spans():
            S0 = state.recurrent[b] if state is not None else q.new_zeros(self.H, self.K, self.K, dtype=torch.float32)
            o[s:e], S = delta_rule(qn[s:e], kn[s:e], v[s:e].float(), decay[s:e], beta[s:e], S0)
            if state is not None:
                state.recurrent[b] = S
        return o

    def _fast(self, q, k, v, g, beta_logits, batch, state):
        from dayone.kernels.kda import chunk_kda, kda_decode

        gate_args = {"gate": self.gate_kind, "lower_bound": self.lower if self.lower is not None else -5.0}
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
