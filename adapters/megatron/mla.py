"""Multi-latent attention on megatron-core's MLASelfAttention: NoPE or rotary, an optional output gate, and a core
attention that takes MLA's head dims.

megatron-core's MLA always rotates the qk_pos_emb dims. With rope (`mla.rope`) that is the spec's rotation, set up by
config.rope_fields; a NoPE spec's MLA never rotates them (`mla.nope`), so its rotary embedding is replaced by
`NoRotaryEmbedding`, whose zero angles make megatron-core's own rotation the identity (cos 0 = 1, sin 0 = 0).
megatron-core's MLA has no output gate; `GatedMLASelfAttention` adds K3's (attn * sigmoid(linear_output_gate(x)),
column-parallel like the heads it gates). Its local DotProductAttention takes no k_channels, so the core attention
is `MLACoreAttention`: causal softmax attention over [s, b, h, d].
"""

from __future__ import annotations

import itertools

import torch
from megatron.core.models.common.embeddings.rotary_pos_embedding import RotaryEmbedding
from megatron.core.tensor_parallel.layers import ColumnParallelLinear
from megatron.core.transformer.module import MegatronModule
from megatron.core.transformer.multi_latent_attention import MLASelfAttention


class NoRotaryEmbedding(RotaryEmbedding):
    """Angles of zero for every position: the rotation megatron-core applies to the rope dims leaves them as they are."""

    def forward(self, max_seq_len: int, offset: int = 0, packed_seq: bool = False, cp_group=None) -> torch.Tensor:
        return torch.zeros(max_seq_len, 1, 1, 2 * self.inv_freq.numel(), device=self.inv_freq.device)


class MLACoreAttention(MegatronModule):
    """softmax(q k^T * softmax_scale, causal) v in fp32 -> [s, b, h * v_channels]; packed sequences (THD, as Miles
    trains: q, k, v [t, h, d] with cu_seqlens) attend within their own sequence -> [t, h * v_channels]."""

    def __init__(self, config, layer_number, attn_mask_type, attention_type=None, softmax_scale=None, **_):
        # megatron-core's Attention builds a core attention first (no MLA head dims), MLASelfAttention then replaces it
        super().__init__(config=config)
        self.softmax_scale = softmax_scale

    def forward(self, query, key, value, attention_mask, attn_mask_type=None, packed_seq_params=None, **_):
        if packed_seq_params is not None:
            segments = itertools.pairwise(packed_seq_params.cu_seqlens_q.tolist())
            parts = [self._causal(*(t[a:b, None] for t in (query, key, value))) for a, b in segments]
            return torch.cat(parts)[:, 0]  # [t, h * v]
        return self._causal(query, key, value)

    def _causal(self, query, key, value):
        """[s, b, h, d] each -> [s, b, h * v]."""
        q, k, v = (t.permute(1, 2, 0, 3).float() for t in (query, key, value))  # [b, h, s, d]
        s = q.shape[2]
        scores = (q @ k.transpose(-1, -2)) * self.softmax_scale
        causal = torch.ones(s, s, dtype=torch.bool, device=q.device).triu(1)
        probs = scores.masked_fill(causal, float("-inf")).softmax(-1)
        out = (probs @ v).to(query.dtype)  # [b, h, s, v]
        return out.permute(2, 0, 1, 3).reshape(s, out.shape[0], -1)


class GatedMLASelfAttention(MLASelfAttention):
    """MLASelfAttention, NoPE unless the spec rotates (`nope` False), and when `output_gate`, K3's sigmoid output
    gate before linear_proj."""

    def __init__(self, *args, output_gate: bool = False, nope: bool = True, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        if nope:
            self.rotary_pos_emb = NoRotaryEmbedding(self.config.qk_pos_emb_head_dim, rotary_percent=1.0)
        self.output_gate = output_gate
        if output_gate:
            self.linear_output_gate = ColumnParallelLinear(
                self.config.hidden_size, self.query_projection_size, config=self.config,
                init_method=self.config.init_method, bias=False, gather_output=False, tp_group=self.pg_collection.tp,
            )  # fmt: skip
            # the gate multiplies linear_proj's input: the core attention output of this call's tokens
            self.linear_proj.register_forward_pre_hook(self._gate_input)
        self._gate: torch.Tensor | None = None

    def _gate_input(self, module, args):
        (core_out, *rest) = args
        gate, self._gate = self._gate, None
        return (core_out * torch.sigmoid(gate.float()).to(core_out.dtype).view(core_out.shape), *rest)

    def forward(self, hidden_states, attention_mask, *args, **kwargs):
        if self.output_gate:
            self._gate, _ = self.linear_output_gate(hidden_states)
        return super().forward(hidden_states, attention_mask, *args, **kwargs)
