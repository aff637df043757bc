"""The public ops of dayone.kernels.short_conv: short_conv (prefill) and short_conv_update (decode, verify); the Triton
kernel for CUDA tensors, the torch counterpart for CPU ones (dayone.kernels.dispatch)."""

from __future__ import annotations

import torch
from dayone.kernels.dispatch import use_triton
from dayone.kernels.short_conv.conv import (
    short_conv_triton,
    short_conv_update_triton,
)
from dayone.kernels.short_conv.torch_conv import short_conv_torch, short_conv_update_torch


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
