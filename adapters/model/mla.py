"""Multi-head latent attention, NoPE or rotary (`rope.py`), optional q LoRA and output gate.

Per token, H heads: q = q_b(q_a_layernorm(q_a(x))) (or q_proj(x)) as [H, nope | rope];
c, k_rope = split(kv_a_proj_with_mqa(x), [kv_lora, rope]); c = kv_a_layernorm(c);
k_nope, v = split(kv_b(c), [nope, v]) per head; k = [k_nope | k_rope shared by all heads];
causal softmax attention with scale (nope + rope)^-0.5 (times YaRN's mscale^2); out = o_proj(attn [* sigmoid(g(x))]).
With rope (mla.nope false), q's rope dims and k_rope turn by the token's position first, so the cache keeps
c | rotated k_rope per token, as the engines' caches do. The attention itself is the op's: the reference tier calls
`mla_attention_reference` (kernels/mla_decode/reference.py: every cached latent up-projected); the fast tier absorbs
kv_b into the query and output (w_kc, w_vc: derived tensors, rebuilt from kv_b on every load by the weight map's
`walk.derive`) and calls the public op `dayone.kernels.mla_decode`, whose query i of a span sees the request's first
past + i + 1 cached rows. Its decode step (one token per request) writes the new latents in place into the paged
cache (cache.MLAState) and reads them through its page table; a prefill span reads the same pages (or, without a
cache, its own latents as one page).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from dayone.adapters.model.batch import Batch
from dayone.adapters.model.cache import PAGE_SIZE, MLAState
from dayone.adapters.model.capture import Capture
from dayone.adapters.model.config import Tier
from dayone.adapters.model.module import SpecModule
from dayone.adapters.model.norms import rms_norm
from dayone.adapters.model.rope import Rotary
from dayone.adapters.weightmap.walk import derive
from dayone.kernels.mla_decode.reference import mla_attention_reference
from dayone.spec.schema import ModelSpec

# Queries per mla_decode call in a prefill span: its CPU path gathers each query's rows, so a chunk holds at most
# about this many cached elements (fp32) at once.
PREFILL_ELEMENTS = 1 << 26


class MLA(SpecModule):
    def __init__(self, spec: ModelSpec, tier: Tier, device=None) -> None:
        super().__init__(tier)
        mla = spec.mla
        assert mla is not None
        D, H = spec.hidden_size, mla.num_heads
        self.H, self.C, self.R = H, mla.kv_lora_rank, mla.qk_rope_head_dim
        self.nope, self.vdim, self.eps = mla.qk_nope_head_dim, mla.v_head_dim, mla.norm_eps
        self.scale = mla.softmax_scale
        self.rotary = Rotary(mla.rope, self.R) if mla.rope is not None else None  # None: NoPE
        self.q_lora = mla.q_lora_rank is not None
        if self.q_lora:
            self.add_weight("q_a_proj", (mla.q_lora_rank, D), "mla.q_a", device)
            self.add_weight("q_a_layernorm", (mla.q_lora_rank,), "mla.q_a_norm", device)
            self.add_weight("q_b_proj", (H * mla.qk_head_dim, mla.q_lora_rank), "mla.q_b", device)
        else:
            self.add_weight("q_proj", (H * mla.qk_head_dim, D), "mla.q_proj", device)
        self.add_weight("kv_a_proj_with_mqa", (self.C + self.R, D), "mla.kv_a", device)
        self.add_weight("kv_a_layernorm", (self.C,), "mla.kv_a_norm", device)
        self.add_weight("kv_b_proj", (H * (self.nope + self.vdim), self.C), "mla.kv_b", device)
        self.output_gate = mla.output_gate
        if self.output_gate:
            self.add_weight("g_proj", (H * self.vdim, D), "mla.g_proj", device)
        self.add_weight("o_proj", (D, H * self.vdim), "mla.o_proj", device)
        self.add_derived("w_kc")  # [H, nope, C]
        self.add_derived("w_vc")  # [H, v, C]

    def compute_derived(self) -> None:
        dims = (self.H, self.nope, self.vdim)  # the weight map's derivation, as the engines' adapters are judged by
        self.w_kc = derive("mla_w_kc", [self.kv_b_proj], dims)
        self.w_vc = derive("mla_w_vc", [self.kv_b_proj], dims)

    def new_state(self, batch_size: int, device=None, page_size: int = PAGE_SIZE, capacity_tokens: int = 0) -> MLAState:
        """An empty paged latent cache; capacity_tokens per request reserved up front (it grows past them)."""
        return MLAState(batch_size, self.C + self.R, self.tier.dtype, device, page_size, capacity_tokens)

    def forward(self, x: torch.Tensor, batch: Batch, state: MLAState | None, capture: Capture | None = None):
        """x [N, D] packed normalized inputs -> [N, D]. state (if given): latents read and extended."""
        N = x.shape[0]
        if self.q_lora:
            q = F.linear(rms_norm(F.linear(x, self.q_a_proj), self.q_a_layernorm, self.eps), self.q_b_proj)
        else:
            q = F.linear(x, self.q_proj)
        q = q.view(N, self.H, self.nope + self.R)
        c, k_rope = F.linear(x, self.kv_a_proj_with_mqa).split([self.C, self.R], dim=-1)
        if self.rotary is not None:  # q's rope dims and the shared k_pe turn by each token's position
            positions = torch.cat([torch.arange(p, p + n, device=x.device) for n, p in zip(batch.seqlens, batch.past)])
            q_nope, q_rope = q.split([self.nope, self.R], dim=-1)
            q = torch.cat([q_nope, self.rotary.rotate(q_rope, positions)], dim=-1)
            k_rope = self.rotary.rotate(k_rope, positions)
        latents = torch.cat([rms_norm(c, self.kv_a_layernorm, self.eps), k_rope], dim=-1)  # [N, C + R]
        out = x.new_zeros(N, self.H, self.vdim)
        decode = not self.tier.is_reference and state is not None and N > 0 and all(n == 1 for n in batch.seqlens)
        for b, s, e in [] if decode else batch.spans():
            past = state.lengths[b] if state is not None else 0
            if state is not None:
                state.append(b, latents[s:e])
            if self.tier.is_reference:
                keys = state.tokens(b) if state is not None else latents[s:e]
                out[s:e] = mla_attention_reference(q[s:e], keys, self.kv_b_proj, self.C, self.vdim, self.scale, past)
            else:  # the request's pages (already holding the span), or without a cache the span's latents as one page
                pages = (state.pool, state.page_table[b : b + 1]) if state is not None else (latents[s:e][None], None)
                out[s:e] = self._absorbed(q[s:e], pages, past)
        if decode:
            out = self._decode(q, latents, state)
        out = out.reshape(N, self.H * self.vdim)
        if self.output_gate:
            out = (out.float() * torch.sigmoid(F.linear(x, self.g_proj).float())).to(x.dtype)
        return F.linear(out, self.o_proj)

    def _absorbed(self, q: torch.Tensor, pages: tuple[torch.Tensor, torch.Tensor | None], past: int) -> torch.Tensor:
        """A span of one request: q [n, H, nope + rope] at positions past .. past + n - 1 -> [n, H, v]. pages: (pool
        [P, page, C + R], the request's page-table row [1, pages], None for page 0). Query i is a decode query of
        mla_decode over the request's first past + i + 1 rows."""
        from dayone.kernels.mla_decode import mla_decode

        n, (pool, table) = q.shape[0], pages
        table = torch.zeros(1, 1, dtype=torch.int32, device=q.device) if table is None else table
        q_abs = self._absorb(q)
        out_lat = q.new_empty(n, self.H, self.C)
        chunk = max(1, PREFILL_ELEMENTS // ((past + n) * pool.shape[-1]))
        for i in range(0, n, chunk):
            m = min(chunk, n - i)
            seq_lens = torch.arange(past + i + 1, past + i + m + 1, dtype=torch.int32, device=q.device)
            out_lat[i : i + m] = mla_decode(
                q_abs[i : i + m], pool, table.expand(m, -1), seq_lens, self.C, self.scale,
                backend=self.tier.backend("mla_decode", q),
            )  # fmt: skip
        return torch.einsum("nhc,hvc->nhv", out_lat, self.w_vc)

    def _absorb(self, q: torch.Tensor) -> torch.Tensor:
        """q [n, H, nope + rope] -> [q_nope W_kc | q_rope] [n, H, C + R], the query mla_decode takes."""
        q_nope, q_rope = q.split([self.nope, self.R], dim=-1)
        return torch.cat([torch.einsum("nhd,hdc->nhc", q_nope, self.w_kc), q_rope], dim=-1)

    def _decode(self, q: torch.Tensor, latents: torch.Tensor, state: MLAState) -> torch.Tensor:
        """One new token per request: q [B, H, nope + rope], latents [B, C + R] -> [B, H, v].

        The new latents are written in place into the paged cache, which the kernel reads through its page table
        as an engine's would: nothing already cached is copied."""
        from dayone.kernels.mla_decode import mla_decode

        state.append_step(latents)
        out_lat = mla_decode(
            self._absorb(q), state.pool, state.page_table, state.seq_lens, self.C, self.scale,
            backend=self.tier.backend("mla_decode", q),
        )  # [B, H, C]  # fmt: skip
        return torch.einsum("nhc,hvc->nhv", out_lat, self.w_vc)
