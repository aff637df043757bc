"""Causal depthwise short convolution with SiLU in plain fp32 torch, token by token: the truth for short_conv.

y[t, d] = silu(sum_w weight[d, w] * x[t - (W - 1) + w, d]); inputs before a sequence's start come from its conv
state (the W - 1 previous inputs, oldest first) or are zero.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def conv_sequence(x: torch.Tensor, weight: torch.Tensor, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """One sequence. x: [T, D]; weight: [D, W]; state: [D, W - 1]. Returns y [T, D] and the new state, fp32."""
    W = weight.shape[1]
    window = torch.cat([state.float().T, x.float()])  # [W - 1 + T, D]
    y = (
        torch.stack([(window[t : t + W].T * weight.float()).sum(-1) for t in range(x.shape[0])])
        if len(x)
        else x.float()
    )
    return F.silu(y), window[window.shape[0] - (W - 1) :].T


def short_conv_reference(x, weight, cu_seqlens=None, initial_state=None):
    """Packed or batched sequences; shapes as in `dayone.kernels.short_conv.short_conv`. Returns (y, final) fp32."""
    B, T, D = x.shape
    weight = weight.reshape(D, -1)
    W = weight.shape[1]
    # (row, start, end) of each sequence: B rows whole, or the cu_seqlens spans of row 0 (this file is shipped alone
    # inside generated packages, so it imports nothing of dayone's: kernels/packed_sequences.py says the same)
    if cu_seqlens is None:
        spans = [(b, 0, T) for b in range(B)]
    else:
        bounds = cu_seqlens.tolist()
        spans = [(0, bounds[n], bounds[n + 1]) for n in range(len(bounds) - 1)]
    y = torch.zeros(B, T, D)
    final = torch.zeros(len(spans), D, W - 1)
    for n, (row, bos, eos) in enumerate(spans):
        s0 = initial_state[n] if initial_state is not None else torch.zeros(D, W - 1)
        y[row, bos:eos], final[n] = conv_sequence(x[row, bos:eos], weight, s0)
    return y, final


def short_conv_update_reference(x, weight, conv_state_pool, slots):
    """Decode/verify truth, token by token: x [N, D] (one token per request) or [N, T, D] (T draft tokens).

    Returns y fp32 in x's shape, the pool after all tokens, and the conv state after every token
    [N, T, D, W - 1] (zeros for padding requests); the input pool is untouched.
    """
    xs = x[:, None] if x.dim() == 2 else x
    N, T, D = xs.shape
    weight = weight.reshape(D, -1)
    pool = conv_state_pool.clone()
    y = torch.zeros(N, T, D)
    states = torch.zeros(N, T, D, weight.shape[1] - 1, dtype=pool.dtype)
    for n, slot in enumerate(slots.tolist()):
        if slot < 0:
            continue
        for t in range(T):
            y_t, new = conv_sequence(xs[n, t : t + 1], weight, pool[slot])
            y[n, t], pool[slot] = y_t[0], new.to(pool.dtype)
            states[n, t] = pool[slot]
    return (y[:, 0] if x.dim() == 2 else y), pool, states
