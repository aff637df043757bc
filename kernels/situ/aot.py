"""What the compile stage needs from situ: one instance for the model's activation, its autotuning configs and launch
inputs (dayone.compile_stage imports this module; the public op does not)."""

from __future__ import annotations

from functools import partial

import torch
from dayone.kernels.autotune import DECODE_BATCH, TORCH_DTYPES, Candidate, Inputs, LaunchArgs, variants
from dayone.kernels.specialization import KernelDims, Specialization


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
