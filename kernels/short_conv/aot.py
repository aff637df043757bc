"""What the compile stage needs from short_conv: the prefill, final-state and decode/verify instances at the spec's conv
width (dayone.compile_stage imports this module; the public op does not)."""

from __future__ import annotations

import triton
from dayone.kernels.short_conv.conv import (
    BD,
    BT,
    short_conv_final_state_kernel,
    short_conv_fwd_kernel,
    short_conv_update_kernel,
)
from dayone.kernels.specialization import KernelDims, Specialization


def specializations(dims: KernelDims) -> list[Specialization]:
    """Short-conv instances for a model's KDA layers: D = heads x head dim (q, k, v each), width W, bf16."""
    if dims.kda_num_heads == 0 or dims.conv_kernel_size == 0:
        return []
    act = {"bf16": "*bf16", "fp16": "*fp16", "fp32": "*fp32"}[dims.dtype]
    W = dims.conv_kernel_size
    fwd = {
        "x": act,
        "weight": "*fp32",
        "y": act,
        "h0": act,
        "seq_idx": "*i32",
        "cu_seqlens": "*i32",
        "T_total": "i32",
        "D": "i32",
    }
    final = {"x": act, "h0": act, "ht": act, "cu_seqlens": "*i32", "D": "i32"}
    update = {
        "x": act,
        "weight": "*fp32",
        "y": act,
        "pool": act,
        "slots": "*i32",
        "inter": act,
        "T": "i32",
        "D": "i32",
        **dict.fromkeys(["W", "WP", "BD", "VERIFY"], "constexpr"),
    }
    specs = [
        Specialization(
            "short_conv.update" + (".verify" if verify else ""),
            short_conv_update_kernel,
            update,
            {"W": W, "WP": triton.next_power_of_2(W), "BD": BD, "VERIFY": verify},
        )
        for verify in (False, True)
    ]
    for has_initial in (False, True):
        flag = ".h0" if has_initial else ""
        specs.append(
            Specialization(
                "short_conv.fwd" + flag,
                short_conv_fwd_kernel,
                {**fwd, **dict.fromkeys(["W", "BT", "BD", "HAS_INITIAL"], "constexpr")},
                {"W": W, "BT": BT, "BD": BD, "HAS_INITIAL": has_initial},
            )
        )
        specs.append(
            Specialization(
                "short_conv.final_state" + flag,
                short_conv_final_state_kernel,
                {**final, **dict.fromkeys(["W", "BD", "HAS_INITIAL"], "constexpr")},
                {"W": W, "BD": BD, "HAS_INITIAL": has_initial},
            )
        )
    return specs
