"""One decoder layer: megatron-core's TransformerLayer (its submodules built from the layer spec) with the residual
stream of the spec: plain, or attention residuals.

Plain:     h += attn(input_layernorm(h));  h += mlp(pre_mlp_layernorm(h))     (dropout 0: bias-dropout-add is +)
Attention: each sublayer reads RMSNorm(a softmax mix of the block snapshots and the running prefix) instead of h
           (`AttentionResidual`, dayone's `attn_res_aggregate`); at a snapshot layer the old prefix joins the bank
           and the attention output starts the new prefix. The bank travels between layers in a `ResidualStream`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from dayone.kernels.attn_residual import attn_res_aggregate, combined_score_weight
from megatron.core.transformer.module import MegatronModule
from megatron.core.transformer.transformer_config import TransformerConfig
from megatron.core.transformer.transformer_layer import TransformerLayer


@dataclass
class ResidualStream:
    """prefix [s, b, D]: the hidden state (plain residuals use nothing else); bank: the snapshots before it."""

    prefix: torch.Tensor
    bank: list[torch.Tensor] = field(default_factory=list)


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

    def forward(self, stream: ResidualStream, norm_weight: torch.Tensor) -> torch.Tensor:
        """RMSNorm(mix of the stream; norm_weight) [s, b, D]: the input of the sublayer behind this point."""
        s, b, D = stream.prefix.shape
        prefix = stream.prefix.reshape(s * b, D)
        bank = torch.stack([t.reshape(s * b, D) for t in stream.bank], dim=1) if stream.bank else None
        w_comb = combined_score_weight(self.norm.weight, self.proj.weight)
        return attn_res_aggregate(bank, prefix, w_comb, norm_weight, self.eps).reshape(s, b, D)


class HybridTransformerLayer(TransformerLayer):
    """TransformerLayer with the spec's residual stream. `snapshot`: this layer starts a new attention-residual
    block; `attention_residual_eps` None: plain residuals."""

    def __init__(self, config, submodules, layer_number: int = 1, snapshot: bool = False,
                 attention_residual_eps: float | None = None, **kwargs):  # fmt: skip
        super().__init__(config, submodules, layer_number, **kwargs)
        self.snapshot = snapshot
        self.attention_residuals = attention_residual_eps is not None
        if self.attention_residuals:
            self.attn_res = AttentionResidual(config, attention_residual_eps)
            self.mlp_res = AttentionResidual(config, attention_residual_eps)

    def forward(self, stream: ResidualStream, attention_mask=None, packed_seq_params=None, **_) -> ResidualStream:
        if self.attention_residuals:
            h = self.attn_res(stream, self.input_layernorm.weight)
        else:
            h = self.input_layernorm(stream.prefix)
        attn, bias = self.self_attention(h, attention_mask=attention_mask, packed_seq_params=packed_seq_params)
        if bias is not None:
            attn = attn + bias
        if not self.attention_residuals:
            stream = ResidualStream(stream.prefix + attn)
            h = self.pre_mlp_layernorm(stream.prefix)
        else:
            if self.snapshot:
                stream = ResidualStream(attn, [*stream.bank, stream.prefix])
            else:
                stream = ResidualStream(stream.prefix + attn, stream.bank)
            h = self.mlp_res(stream, self.pre_mlp_layernorm.weight)
        out, bias = self.mlp(h)
        if bias is not None:
            out = out + bias
        return ResidualStream(stream.prefix + out, stream.bank)
