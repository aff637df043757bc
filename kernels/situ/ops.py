"""The public op of dayone.kernels.situ: act_and_mul; the Triton kernel for CUDA tensors, the torch counterpart for CPU
ones (dayone.kernels.dispatch)."""

from __future__ import annotations

import os

import torch
from dayone.kernels.dispatch import use_triton
from dayone.kernels.situ.reference import ACTIVATIONS, act_and_mul_reference


def act_and_mul(
    x: torch.Tensor,
    up: torch.Tensor | None = None,
    *,
    activation: str = "situ",
    beta: float = 4.0,
    linear_beta: float = 25.0,
    backend: str | None = None,
) -> torch.Tensor:
    """out = act(gate) * up' in fp32 math, returned in the input dtype.

    SiTU: act(gate) = beta * tanh(gate / beta) * sigmoid(gate), up' = linear_beta * tanh(up / linear_beta).
    SiLU: act(gate) = gate * sigmoid(gate), up' = up.

    Args:
        x: the fused gate_up projection [..., 2I] (gate = first half, up = second half), or the gate [..., I]
            when `up` is given.
        up: the up projection [..., I], or None.
        activation: "situ" | "silu".
        beta, linear_beta: SiTU bounds (K3: activation_situ_beta 4.0, activation_situ_linear_beta 25.0).
        backend: None (CUDA -> Triton, CPU -> torch), "triton" or "torch".
    Returns:
        [..., I] in x's dtype.
    """
    if activation not in ACTIVATIONS:
        raise ValueError(f"act_and_mul: activation must be one of {ACTIVATIONS}, got {activation!r}")
    triton = use_triton(x, backend, "act_and_mul")
    if up is None:
        if x.shape[-1] % 2:
            raise ValueError(f"act_and_mul: fused gate_up width {x.shape[-1]} is odd")
        gate, up = x.chunk(2, dim=-1)
    else:
        gate = x
        if gate.shape != up.shape:
            raise ValueError(f"act_and_mul: gate {tuple(gate.shape)} and up {tuple(up.shape)} differ")
    if not triton:
        return act_and_mul_reference(gate, up, activation, beta, linear_beta)
    from dayone.kernels.situ.kernel import launch

    lead, width = gate.shape[:-1], gate.shape[-1]
    # reshape keeps the halves as strided views when it can; the kernel needs only unit column stride
    gate2, up2 = gate.reshape(-1, width), up.reshape(-1, width)
    gate2 = gate2 if gate2.stride(-1) == 1 else gate2.contiguous()
    up2 = up2 if up2.stride(-1) == 1 else up2.contiguous()
    # The interpreter's fp32->bf16 cast truncates instead of rounding to nearest (triton 3.9), so under it the
    # kernel stores fp32 and torch rounds; on a GPU the kernel stores the input dtype itself.
    interpreting = os.environ.get("TRITON_INTERPRET") == "1"
    out = torch.empty(gate2.shape, dtype=torch.float32 if interpreting else x.dtype, device=x.device)
    if out.numel():
        launch(gate2, up2, out, activation == "situ", float(beta), float(linear_beta))
    return out.to(x.dtype).reshape(*lead, width)
