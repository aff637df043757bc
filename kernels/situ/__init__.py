"""The MLP's gated activation: SiTU-and-mul (Kimi K3) or SiLU-and-mul (Kimi Linear), one op with a flag."""

from __future__ import annotations

import os
from functools import partial

import torch
from dayone.kernels.autotune import DECODE_BATCH, TORCH_DTYPES, Candidate, Inputs, LaunchArgs, variants
from dayone.kernels.dispatch import use_triton
from dayone.kernels.situ.reference import ACTIVATIONS, act_and_mul_reference
from dayone.kernels.specialization import KernelDims, Specialization

__all__ = ["act_and_mul", "candidates", "specializations"]


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


def specializations(dims: KernelDims) -> list[Specialization]:
    """One instance for the model's activation; the width (dense, shared, routed intermediate) is a runtime arg."""
    from dayone.kernels.situ.kernel import act_and_mul_kernel

    act = "*" + dims.dtype
    return [
        Specialization(
            kernel=f"situ.act_and_mul_{dims.activation}",
            fn=act_and_mul_kernel,
            signature={"gate_ptr": act, "up_ptr": act, "out_ptr": act, "I": "i32", "stride_gate": "i32"}
            | {"stride_up": "i32", "beta": "fp32", "linear_beta": "fp32", "SITU": "constexpr", "BLOCK": "constexpr"},
            constexprs={"SITU": dims.activation == "situ", "BLOCK": 1024},
            num_warps=4,
            num_stages=1,
        )
    ]


# Autotuning alternatives (columns per program, warps) to the shipped BLOCK=1024 with 4 warps; all fit every arch.
CONFIGS = (
    {"BLOCK": 512}, {"BLOCK": 512, "num_warps": 2}, {"BLOCK": 2048}, {"BLOCK": 2048, "num_warps": 8},
    {"BLOCK": 4096, "num_warps": 8},
)  # fmt: skip


def candidates(dims: KernelDims) -> list[Candidate]:
    """The activation of the routed experts in one decode step."""
    return [
        Candidate(variants(spec, CONFIGS), partial(act_and_mul_args, dims), ("out_ptr",))
        for spec in specializations(dims)
    ]


def act_and_mul_args(dims: KernelDims, device: str, tiny: bool = False) -> LaunchArgs:
    """Decode batch 64 times experts_per_token rows of the routed experts' fused gate_up [rows, 2I] (halves as
    strided views), I = expert_intermediate_size (hidden_size without a MoE); K3's SiTU bounds 4 and 25.

    tiny: 3 rows of I = 300, fp32.
    """
    import triton

    if tiny:
        rows, width, dtype = 3, 300, torch.float32
    else:
        rows = DECODE_BATCH * max(dims.experts_per_token, 1)
        width, dtype = dims.moe_intermediate_size or dims.hidden_size, TORCH_DTYPES[dims.dtype]
    x = Inputs(device)
    gate_up = x.randn(rows, 2 * width, dtype=dtype, scale=4.0)  # across the tanh bounds, not only near 0
    out = x.nans(rows, width, dtype=dtype)
    args = (gate_up[:, :width], gate_up[:, width:], out, width, gate_up.stride(0), gate_up.stride(0), 4.0, 25.0)
    grid = lambda meta: (rows, triton.cdiv(width, meta["BLOCK"]))
    return grid, args, {}
