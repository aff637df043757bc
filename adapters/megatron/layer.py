"""One decoder layer: megatron-core's TransformerLayer (its submodules built from the layer spec) with the residual
stream of the spec, inside megatron-core's own TransformerBlock.

Plain:     h += attn(input_layernorm(h));  h += mlp(pre_mlp_layernorm(h))     (dropout 0: bias-dropout-add is +)
Attention: each sublayer reads RMSNorm(a softmax mix of the block snapshots and the running prefix) instead of h
           (`AttentionResidual`, dayone's `attn_res_aggregate`); at a snapshot layer the old prefix joins the bank
           and the attention output starts the new prefix. The bank [s, b, n, D] travels from layer to layer as
           TransformerBlock's `context` (each layer returns (hidden_states, context)); the last layer mixes the
           stream once more (`final_attn_res`), so TransformerBlock's final_layernorm reads the mix.
"""

from __future__ import annotations

import torch
from dayone.kernels.attn_residual import attn_res_aggregate, combined_score_weight
from megatron.core.transformer.module import MegatronModule
from megatron.core.transformer.transformer_config import TransformerConfig
from megatron.core.transformer.transformer_layer import TransformerLayer


class AttentionResidual(MegatronModule):
    """One aggregation point: `norm.weight` [D] and `proj.weight` [1, D], replicated over tensor parallelism."""

    def __init__(self, config: TransformerConfig, eps: float) -> None:
        super().__init__(config=config)
        D = config.hidden_size
        self.eps = eps
        self.norm = torch.nn.Module()
        self.norm.weight = torch.nn.Parameter(torch.ones(D, dtype=config.params_dtype))
        self.proj = torch.nn.Module()
        self.proj.weight = torch.nn.Parameter(torch.empty(1, D, dtype=config.params_dtype))
        if config.perform_initialization:
            config.init_method(self.proj.weight.data)
        for weight in (self.norm.weight, self.proj.weight):  # per-token: summed over TP ranks under SP, as norms are
            weight.sequence_parallel = config.sequence_parallel

    def forward(self, prefix: torch.Tensor, bank: torch.Tensor, norm_weight: torch.Tensor | None) -> torch.Tensor:
        """prefix [s, b, D], bank [s, b, n, D] -> RMSNorm(the mix; norm_weight) [s, b, D] (norm_weight None: the mix)."""
        s, b, D = prefix.shape
        w_comb = combined_score_weight(self.norm.weight, self.proj.weight)
        rows = bank.reshape(s * b, -1, D) if bank.shape[2] else None
        if norm_weight is None:
            # the output mix alone: TransformerBlock's final_layernorm normalises it
            ones = prefix.new_ones(D)
            out = attn_res_aggregate(rows, prefix.reshape(s * b, D), w_comb, ones, self.eps, return_mixed=True)
            return out[1].to(prefix.dtype).reshape(s, b, D)
        return attn_res_aggregate(rows, prefix.reshape(s * b, D), w_comb, norm_weight, self.eps).reshape(s, b, D)


class HybridTransformerLayer(TransformerLayer):
    """TransformerLayer with the spec's residual stream. `snapshot`: this layer starts a new attention-residual
    block; `final`: the last layer (mixes the stream for the final norm); `attention_residual_eps` None: plain."""

    def __init__(self, config, submodules, layer_number: int = 1, snapshot: bool = False, final: bool = False,
                 attention_residual_eps: float | None = None, **kwargs):  # fmt: skip
        super().__init__(config, submodules, layer_number, **kwargs)
        self.snapshot = snapshot
        self.attention_residuals = attention_residual_eps is not None
        if self.attention_residuals:
            self.attn_res = AttentionResidual(config, attention_residual_eps)
            self.mlp_res = AttentionResidual(config, attention_residual_eps)
            if final:
                self.final_attn_res = AttentionResidual(config, attention_residual_eps)

    def forward(self, hidden_states, attention_mask=None, context=None, packed_seq_params=None, **_):
        """hidden_states [s, b, D] (the running prefix), context: the bank [s, b, n, D] or None ->
        (hidden_states, context) as TransformerBlock threads them."""
        if not self.attention_residuals:
            h = self.input_layernorm(hidden_states)
            hidden_states = hidden_states + self._attention(h, attention_mask, packed_seq_params)
            return hidden_states + self._mlp(self.pre_mlp_layernorm(hidden_states)), context
        prefix = hidden_states
        bank = context if context is not None else prefix.new_empty(*prefix.shape[:2], 0, prefix.shape[-1])
        attn = self._attention(self.attn_res(prefix, bank, self.input_layernorm.weight), attention_mask,
                               packed_seq_params)  # fmt: skip
        if self.snapshot:
            bank, prefix = torch.cat([bank, prefix.unsqueeze(2)], dim=2), attn
        else:
            prefix = prefix + attn
        prefix = prefix + self._mlp(self.mlp_res(prefix, bank, self.pre_mlp_layernorm.weight))
        if hasattr(self, "final_attn_res"):
            prefix = self.final_attn_res(prefix, bank, None)
        return prefix, bank

    def _attention(self, h, attention_mask, packed_seq_params) -> torch.Tensor:
        out, bias = self.self_attention(h, attention_mask=attention_mask, packed_seq_params=packed_seq_params)
        return out if bias is None else out + bias

    def _mlp(self, h) -> torch.Tensor:
        out, bias = self.mlp(h)
        return out if bias is None else out + bias
