"""Causal depthwise short convolution (width W, no bias) with SiLU: packed prefill and a decode update over a pool.

Ladder: reference.py (fp32 truth) -> conv.py (Triton) -> torch_conv.py (CPU fast tier). CUDA tensors run Triton;
CPU tensors run torch unless backend="triton" (interpreter tests). For speculative decoding, `short_conv_update`
verifies T draft tokens per request into an intermediate buffer and `commit_accepted` keeps the accepted prefix.
"""

from __future__ import annotations

import torch
import triton
from dayone.kernels.dispatch import use_triton
from dayone.kernels.short_conv.conv import (
    BD,
    BT,
    short_conv_final_state_kernel,
    short_conv_fwd_kernel,
    short_conv_triton,
    short_conv_update_kernel,
    short_conv_update_triton,
)
from dayone.kernels.short_conv.torch_conv import short_conv_torch, short_conv_update_torch
from dayone.kernels.specialization import KernelDims, Specialization
from dayone.kernels.speculative import commit_accepted

__all__ = ["commit_accepted", "short_conv", "short_conv_update", "specializations"]


def short_conv(
    x: torch.Tensor,
    weight: torch.Tensor,
    *,
    cu_seqlens: torch.Tensor | None = None,
    initial_state: torch.Tensor | None = None,
    output_final_state: bool = True,
    backend: str | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """y = silu(causal depthwise conv(x)) per sequence, for prefill.

    Args:
        x: [B, T, D]; with cu_seqlens [N + 1], B = 1 and N sequences are packed along T.
        weight: [D, W] or the checkpoint's [D, 1, W]; no bias.
        initial_state: [N, D, W - 1] the previous W - 1 inputs of each sequence, oldest first (zeros when None).
    Returns:
        y: [B, T, D] in x's dtype; final_state: [N, D, W - 1] in initial_state's (else x's) dtype, or None.
    """
    if cu_seqlens is not None and x.shape[0] != 1:
        raise ValueError(f"packed sequences (cu_seqlens) need B = 1, got x of shape {tuple(x.shape)}")
    run = short_conv_triton if use_triton(x, backend, "short_conv") else short_conv_torch
    return run(x, weight, cu_seqlens, initial_state, output_final_state)


def short_conv_update(
    x: torch.Tensor,
    weight: torch.Tensor,
    conv_state_pool: torch.Tensor,
    slots: torch.Tensor,
    *,
    intermediate_states: torch.Tensor | None = None,
    backend: str | None = None,
) -> torch.Tensor:
    """Decode or verify: y = silu(conv([state, x])) per token, the conv state advancing one input per token.

    Args:
        x: [N, D], one decode token per request, or [N, T, D], T tokens per request (the draft tokens to verify).
        weight: [D, W] or [D, 1, W].
        conv_state_pool: [P, D, W - 1], contiguous.
        slots: [N] int pool slot per request; negative slots are padding (skipped, y = 0).
        intermediate_states: None for decode: conv_state_pool[slots[n]] is updated in place after the T tokens.
            For verify, a contiguous buffer [N, T, D, W - 1] (the pool's dtype): the state after token t goes to
            intermediate_states[n, t] and the pool is left alone; keep the accepted prefix with `commit_accepted`.
    Returns:
        y: x's shape and dtype.
    """
    if intermediate_states is not None:
        N, T, D = (x[:, None] if x.dim() == 2 else x).shape
        expected = (N, T, D, conv_state_pool.shape[-1])
        if tuple(intermediate_states.shape) != expected:
            raise ValueError(f"intermediate_states must be {list(expected)}, got {list(intermediate_states.shape)}")
    run = short_conv_update_triton if use_triton(x, backend, "short_conv") else short_conv_update_torch
    return run(x, weight, conv_state_pool, slots, intermediate_states)


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
