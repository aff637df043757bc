"""Gated MLPs: the dense layer, the shared experts, and the activation every expert uses.

silu: silu(gate) * up.   situ: beta*tanh(gate/beta)*sigmoid(gate) * linear_beta*tanh(up/linear_beta).
Both in fp32 math. The reference tier calls the op's reference (`dayone.kernels.situ.reference`), the fast tier its
public function (`dayone.kernels.situ.act_and_mul`).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from dayone.adapters.model.config import Tier
from dayone.adapters.model.module import SpecModule
from dayone.kernels.situ.reference import act_and_mul_reference
from dayone.spec.schema import Activation


def gated_activation(gate: torch.Tensor, up: torch.Tensor, act: Activation, tier: Tier) -> torch.Tensor:
    """act(gate) * up' [..., I] in fp32 math, returned in gate's dtype."""
    betas = {"beta": act.beta, "linear_beta": act.linear_beta} if act.kind == "situ" else {}
    if tier.is_reference:
        return act_and_mul_reference(gate, up, act.kind, **betas)
    from dayone.kernels.situ import act_and_mul

    return act_and_mul(gate, up, activation=act.kind, **betas, backend=tier.backend("act_and_mul", gate))


class MLP(SpecModule):
    """down(act(gate(x)) * up(x)). role: the manifest role prefix ("mlp" for the dense layer, "moe.shared")."""

    def __init__(self, width: int, intermediate: int, act: Activation, role: str, tier: Tier, device=None) -> None:
        super().__init__(tier)
        self.act = act
        self.add_weight("gate_proj", (intermediate, width), f"{role}.gate", device)
        self.add_weight("up_proj", (intermediate, width), f"{role}.up", device)
        self.add_weight("down_proj", (width, intermediate), f"{role}.down", device)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = gated_activation(F.linear(x, self.gate_proj), F.linear(x, self.up_proj), self.act, self.tier)
        return F.linear(h, self.down_proj)
