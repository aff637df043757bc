"""What the compile stage needs from gated_rmsnorm: one instance per KDA head dim (dayone.compile_stage imports this
module; the public op does not)."""

from __future__ import annotations

from dayone.kernels.gated_rmsnorm.norm import BR, gated_rmsnorm_kernel
from dayone.kernels.specialization import KernelDims, Specialization


def specializations(dims: KernelDims) -> list[Specialization]:
    """One instance per KDA head dim: bf16 activations, fp32 weight (the checkpoint's o_norm is F32)."""
    if dims.kda_num_heads == 0:
        return []
    act = "*" + dims.dtype
    V = dims.kda_head_dim
    sig = {
        "x": act,
        "gate": act,
        "weight": "*fp32",
        "y": act,
        "R": "i32",
        "eps": "fp32",
        "V": "constexpr",
        "BV": "constexpr",
        "BR": "constexpr",
    }
    bv = 1 << (V - 1).bit_length()
    return [Specialization("gated_rmsnorm", gated_rmsnorm_kernel, sig, {"V": V, "BV": bv, "BR": BR})]
