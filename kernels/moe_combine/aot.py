"""What the compile stage needs from moe_combine: one instance per model, its autotuning configs and launch inputs
(dayone.compile_stage imports this module; the public op does not)."""

from __future__ import annotations

from functools import partial

import torch
from dayone.kernels.autotune import PREFILL_TOKENS, TORCH_DTYPES, Candidate, Inputs, LaunchArgs, variants
from dayone.kernels.specialization import KernelDims, Specialization


def specializations(dims: KernelDims) -> list[Specialization]:
    """One instance per model: top-k and the norm are constexprs, the row width a power-of-two block over it."""
    if dims.num_experts == 0:
        return []
    from dayone.kernels.moe_combine.kernel import moe_combine_kernel

    act = "*" + dims.dtype
    width = dims.moe_hidden_size or dims.hidden_size
    block = 1 << (width - 1).bit_length()
    return [
        Specialization(
            kernel="moe_combine",
            fn=moe_combine_kernel,
            signature={"expert_ptr": act, "weight_ptr": "*fp32", "norm_ptr": act, "out_ptr": act, "L": "i32"}
            | {"stride_et": "i32", "stride_ek": "i32", "stride_wt": "i32", "eps": "fp32"}
            | {"TOP_K": "constexpr", "HAS_NORM": "constexpr", "BLOCK_L": "constexpr"},
            constexprs={"TOP_K": dims.experts_per_token, "HAS_NORM": dims.latent_moe, "BLOCK_L": block},
            num_warps=8,
            num_stages=1,
        )
    ]


# Autotuning alternatives to the shipped 8 warps. BLOCK_L is not tuned: the norm needs the whole row in one program.
CONFIGS = ({"num_warps": 4}, {"num_warps": 16})


def candidates(dims: KernelDims) -> list[Candidate]:
    """The combine of a prefill chunk: at decode batch 64 it is 64 programs, too few for a config to matter."""
    return [
        Candidate(variants(spec, CONFIGS), partial(combine_args, dims), ("out_ptr",)) for spec in specializations(dims)
    ]


def combine_args(dims: KernelDims, device: str, tiny: bool = False) -> LaunchArgs:
    """8192 tokens' experts_per_token expert outputs of the MoE width (the latent size for a latent MoE), with the
    norm weight when the spec has a latent norm.

    tiny: 3 tokens of width 40 (BLOCK_L 64), fp32.
    """
    if tiny:
        tokens, width, dtype = 3, 40, torch.float32
    else:
        tokens, width, dtype = PREFILL_TOKENS, dims.moe_hidden_size or dims.hidden_size, TORCH_DTYPES[dims.dtype]
    k = dims.experts_per_token
    x = Inputs(device)
    expert = x.randn(tokens, k, width, dtype=dtype)
    weights = x.randn(tokens, k).softmax(-1)
    norm = x.randn(width, dtype=dtype)
    out = x.nans(tokens, width, dtype=dtype)
    args = (expert, weights, norm, out, width, expert.stride(0), expert.stride(1), weights.stride(0), 1e-5)
    return (tokens,), args, {"BLOCK_L": 64} if tiny else {}
