"""What the compile stage needs from mxfp4: the dequant and mat-vec instances when routed experts are MXFP4, the mat-
vec's autotuning configs and launch inputs (dayone.compile_stage imports this module; the public op does not)."""

from __future__ import annotations

from functools import partial

import torch
from dayone.kernels.autotune import TORCH_DTYPES, Candidate, Inputs, LaunchArgs, variants
from dayone.kernels.mxfp4.reference import (
    GROUP_SIZE,
)
from dayone.kernels.specialization import KernelDims, Specialization


def specializations(dims: KernelDims) -> list[Specialization]:
    """Kernel instances a model needs: none unless its routed experts are MXFP4 (K3: group 32, bf16 activations).

    Matrix sizes are runtime arguments, so one instance serves gate/up (3072 x 3584) and down (3584 x 3072).
    """
    if dims.mxfp4_group_size == 0:
        return []
    if dims.mxfp4_group_size != GROUP_SIZE:
        raise ValueError(f"mxfp4: group size {dims.mxfp4_group_size} unsupported (only {GROUP_SIZE})")
    from dayone.kernels.mxfp4.kernel import mxfp4_dequant_kernel, mxfp4_linear_kernel

    act = "*" + dims.dtype
    strides = {"stride_packed": "i32", "stride_scale": "i32", "stride_out": "i32"}
    dequant = Specialization(
        kernel="mxfp4.dequant",
        fn=mxfp4_dequant_kernel,
        signature={"packed_ptr": "*u8", "scale_ptr": "*u8", "out_ptr": act, "N": "i32", "K_PACKED": "i32"}
        | strides
        | {"BLOCK_N": "constexpr", "BLOCK_KP": "constexpr"},
        constexprs={"BLOCK_N": 32, "BLOCK_KP": 64},
        num_warps=4,
        num_stages=1,
    )
    linear = Specialization(
        kernel="mxfp4.linear",
        fn=mxfp4_linear_kernel,
        signature={"x_ptr": act, "packed_ptr": "*u8", "scale_ptr": "*u8", "out_ptr": act}
        | {"M": "i32", "N": "i32", "K_PACKED": "i32", "stride_x": "i32"}
        | strides
        | {"BLOCK_M": "constexpr", "BLOCK_N": "constexpr", "BLOCK_KP": "constexpr", "DOT_FP32": "constexpr"},
        constexprs={"BLOCK_M": 16, "BLOCK_N": 32, "BLOCK_KP": 64, "DOT_FP32": False},
        num_warps=4,
        num_stages=3,
    )
    return [dequant, linear]


# Autotuning alternatives (output rows and packed bytes per tile, warps, stages) to the shipped BLOCK_N=32
# BLOCK_KP=64 4 warps 3 stages; all fit sm_90 without spills (at most 24 KiB of shared memory). BLOCK_M stays 16,
# tl.dot's smallest tile, for decode batches of 1..16. The kernel has no split-K: every program walks the whole K.
LINEAR_CONFIGS = (
    {"BLOCK_N": 16, "BLOCK_KP": 128}, {"BLOCK_KP": 128}, {"BLOCK_N": 64},
    {"BLOCK_N": 64, "BLOCK_KP": 128, "num_warps": 8}, {"BLOCK_N": 128, "num_warps": 8},
    {"BLOCK_N": 16, "BLOCK_KP": 256, "num_stages": 4}, {"BLOCK_KP": 256, "num_warps": 8, "num_stages": 4},
)  # fmt: skip


def candidates(dims: KernelDims) -> list[Candidate]:
    """The mat-vec at batch 1 over the gate projections of one token's experts, stacked."""
    return [
        Candidate(variants(spec, LINEAR_CONFIGS), partial(linear_args, dims), ("out_ptr",))
        for spec in specializations(dims)
        if spec.kernel == "mxfp4.linear"
    ]


def linear_args(dims: KernelDims, device: str, tiny: bool = False) -> LaunchArgs:
    """y [1, k * I] = x [1, H_moe] @ W^T: the experts_per_token gate projections of one decode token as one matrix.

    tiny: 3 rows of x, 70 output rows, K = 256, fp32 x.
    """
    import triton

    if tiny:
        m, n, k, dtype = 3, 70, 256, torch.float32
    else:
        m, n, k = 1, dims.experts_per_token * dims.moe_intermediate_size, dims.moe_hidden_size
        dtype = TORCH_DTYPES[dims.dtype]
    x = Inputs(device)
    packed = x.randint(0, 256, n, k // 2, dtype=torch.uint8)
    scale = x.randint(118, 130, n, k // GROUP_SIZE, dtype=torch.uint8)
    act = x.randn(m, k, dtype=dtype)
    out = x.nans(m, n, dtype=dtype)
    args = (act, packed, scale, out, m, n, k // 2, act.stride(0), packed.stride(0), scale.stride(0), out.stride(0))
    grid = lambda meta: (triton.cdiv(n, meta["BLOCK_N"]), triton.cdiv(m, meta["BLOCK_M"]))
    return grid, args, {"DOT_FP32": True} if tiny else {}
