"""Multi-head latent attention, NoPE or rotary (`rope.py`), optional q LoRA and output gate.

Per token, H heads: q = q_b(q_a_layernorm(q_a(x))) (or q_proj(x)) as [H, nope | rope];
c, k_rope = split(kv_a_proj_with_mqa(x), [kv_lora, rope]); c = kv_a_layernorm(c);
k_nope, v = split(kv_b(c), [nope, v]) per head; k = [k_nope | k_rope shared by all heads];
causal softmax attention with scale (nope + rope)^-0.5 (times YaRN's mscale^2); out = o_proj(attn [* sigmoid(g(x))]).
With rope (mla.nope false), q's rope dims and k_rope turn by the token's position first, so the cache keeps
c | rotated k_rope per token, as the engines' caches do. The reference tier up-projects every cached latent; the
fast tier absorbs kv_b into the query and output (w_kc, w_vc: derived tensors, rebuilt from kv_b on every load),
and its decode step (one token per request) writes the new latents in place into the paged cache (cache.MLAState)
and calls `dayone.kernels.mla_decode` on its page table.
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
from dayone.spec.schema import ModelSpec


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
        kv_b = self.kv_b_proj.view(self.H, self.nope + self.vdim, self.C)
        self.w_kc = kv_b[:, : self.nope].contiguous()
        self.w_vc = kv_b[:, self.nope :].contiguous()

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
            keys = state.tokens(b) if state is not None else latents[s:e]
            attend = self._reference if self.tier.is_reference else self._absorbed
            out[s:e] = attend(q[s:e], keys, past)
        if decode:
            out = self._decode(q, latents, state)
        out = out.reshape(N, self.H * self.vdim)
        if self.output_gate:
            out = (out.float() * torch.sigmoid(F.linear(x, self.g_proj).float())).to(x.dtype)
        return F.linear(out, self.o_proj)

    def _mask(self, n: int, t: int, past: int, device) -> torch.Tensor:
        """[n, t] True where query i (position past + i) may see key j."""
        return torch.arange(t, device=device)[None, :] <= past + torch.arange(n, device=device)[:, None]

    def _reference(self, q: torch.Tensor, keys: torch.Tensor, past: int) -> torch.Tensor:
        """q [n, H, nope + rope], keys [t, C + R] latents -> [n, H, v]; plain up-projection, fp32."""
        c, k_rope = keys.float().split([self.C, self.R], dim=-1)
        kv = F.linear(c, self.kv_b_proj.float()).view(-1, self.H, self.nope + self.vdim)
        k_nope, v = kv.split([self.nope, self.vdim], dim=-1)
        k = torch.cat([k_nope, k_rope[:, None, :].expand(-1, self.H, -1)], dim=-1)  # [t, H, nope + rope]
        scores = torch.einsum("nhd,thd->hnt", q.float(), k) * self.scale
        scores = scores.masked_fill(~self._mask(q.shape[0], k.shape[0], past, q.device), float("-inf"))
        return torch.einsum("hnt,thv->nhv", scores.softmax(-1), v).to(q.dtype)

    def _absorbed(self, q: torch.Tensor, keys: torch.Tensor, past: int) -> torch.Tensor:
        """Same result with kv_b absorbed: scores = (q_nope w_kc) . c + q_rope . k_rope; out = (P c) w_vc^T."""
        c, k_rope = keys.split([self.C, self.R], dim=-1)
        q_nope, q_rope = q.split([self.nope, self.R], dim=-1)
        q_lat = torch.einsum("nhd,hdc->hnc", q_nope, self.w_kc)  # [H, n, C]
        # bf16 operands, fp32 scores (as a flash-MLA kernel accumulates and keeps them)
        scores = q_lat.float() @ c.float().T + torch.einsum("nhr,tr->hnt", q_rope.float(), k_rope.float())
        scores = scores * self.scale
        scores = scores.masked_fill(~self._mask(q.shape[0], keys.shape[0], past, q.device), float("-inf"))
        out_lat = scores.softmax(-1).to(q.dtype) @ c  # [H, n, C]
        return torch.einsum("hnc,hvc->nhv", out_lat, self.w_vc)

    def _decode(self, q: torch.Tensor, latents: torch.Tensor, state: MLAState) -> torch.Tensor:
        """One new token per request: q [B, H, nope + rope], latents [B, C + R] -> [B, H, v].

        The new latents are written in place into the paged cache, which the kernel reads through its page table
        as an engine's would: nothing already cached is copied."""
        from dayone.kernels.mla_decode import mla_decode

        state.append_step(latents)
        q_nope, q_rope = q.split([self.nope, self.R], dim=-1)
        q_abs = torch.cat([torch.einsum("nhd,hdc->nhc", q_nope, self.w_kc), q_rope], dim=-1)  # [B, H, C + R]
        out_lat = mla_decode(
            q_abs, state.pool, state.page_table, state.seq_lens, self.C, self.scale,
            backend=self.tier.backend("mla_decode", q),
        )  # [B, H, C]  # fmt: skip
        return torch.einsum("nhc,hvc->nhv", out_lat, self.w_vc)
