"""Small Megatron modules megatron-core has no local (non-TransformerEngine) counterpart for.

RMSNorm: an RMSNorm with its own eps (MLA's q/kv norms and KDA's o_norm differ from the model's).
GatedActivation: SiTU-and-mul or SiLU-and-mul over the MLP's [gate | up] output, dayone's `act_and_mul`.
"""

from __future__ import annotations

import torch
from dayone.adapters.model.norms import rms_norm
from dayone.kernels.situ import act_and_mul
from megatron.core.transformer.module import MegatronModule
from megatron.core.transformer.transformer_config import TransformerConfig


class RMSNorm(torch.nn.Module):
    """x * rsqrt(mean(x^2) + eps) * weight in fp32. `eps` from the layer spec wins over the one megatron-core passes
    (its builders pass config.layernorm_epsilon to every norm)."""

    def __init__(self, config: TransformerConfig, hidden_size: int, eps: float = 1e-5, spec_eps: float | None = None):
        super().__init__()
        self.eps = spec_eps if spec_eps is not None else eps
        self.weight = torch.nn.Parameter(torch.ones(hidden_size, dtype=config.params_dtype))
        self.weight.sequence_parallel = config.sequence_parallel

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return rms_norm(x, self.weight, self.eps)


class GatedActivation(MegatronModule):
    """[..., 2I] = [gate | up] -> [..., I]: SiTU (beta tanh(g / beta) sigmoid(g) * lb tanh(up / lb)) or SiLU-and-mul."""

    def __init__(self, config: TransformerConfig, kind: str = "silu", beta: float = 4.0, linear_beta: float = 25.0):
        super().__init__(config=config)
        self.kind, self.beta, self.linear_beta = kind, beta, linear_beta

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return act_and_mul(x, activation=self.kind, beta=self.beta, linear_beta=self.linear_beta)
