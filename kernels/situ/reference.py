"""Gated activations of the MLPs, in plain fp32 torch: the truth the kernel is compared to.

SiTU (Kimi K3): gate' = b * tanh(gate / b) * sigmoid(gate), up' = lb * tanh(up / lb), out = gate' * up'.
Both tanh factors are soft clamps: gate' is bounded by b and up' by lb, so no activation can run away.
SiLU (Kimi Linear): out = silu(gate) * up.
"""

from __future__ import annotations

import torch

ACTIVATIONS = ("situ", "silu")


def situ_and_mul_reference(gate: torch.Tensor, up: torch.Tensor, beta: float, linear_beta: float) -> torch.Tensor:
    """gate, up [..., I] -> [..., I] in gate's dtype, computed in fp32."""
    g, u = gate.float(), up.float()
    gated = beta * torch.tanh(g / beta) * torch.sigmoid(g)
    linear = linear_beta * torch.tanh(u / linear_beta)
    return (gated * linear).to(gate.dtype)


def silu_and_mul_reference(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    """gate, up [..., I] -> silu(gate) * up [..., I] in gate's dtype, computed in fp32."""
    return (torch.nn.functional.silu(gate.float()) * up.float()).to(gate.dtype)


def act_and_mul_reference(
    gate: torch.Tensor, up: torch.Tensor, activation: str, beta: float = 4.0, linear_beta: float = 25.0
) -> torch.Tensor:
    """Dispatch on `activation` ("situ" | "silu")."""
    if activation == "situ":
        return situ_and_mul_reference(gate, up, beta, linear_beta)
    if activation == "silu":
        return silu_and_mul_reference(gate, up)
    raise ValueError(f"activation must be one of {ACTIVATIONS}, got {activation!r}")
