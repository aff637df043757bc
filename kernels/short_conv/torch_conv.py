"""Short convolution in vectorised torch (W shifted multiply-adds per packed sequence): the CPU fast tier for conv.py."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from dayone.kernels.packed_sequences import sequence_spans


def window_conv(window: torch.Tensor, weight: torch.Tensor, T: int) -> torch.Tensor:
    """silu of the causal conv of the last T positions: window [..., W - 1 + T, D] fp32 (time-major, as x comes),
    weight [D, W] -> [..., T, D].

    W shifted multiply-adds, oldest tap first: prefill, decode and verify do the same arithmetic per token.
    """
    acc = window[..., :T, :] * weight[:, 0]
    for p in range(1, weight.shape[1]):
        acc.addcmul_(window[..., p : p + T, :], weight[:, p])
    return F.silu(acc, inplace=True)


def short_conv_torch(x, weight, cu_seqlens, initial_state, output_final_state):
    """Arguments and results as in `dayone.kernels.short_conv.short_conv`."""
    B, T, D = x.shape
    weight = weight.reshape(D, -1).float()
    W = weight.shape[1]
    spans = sequence_spans(B, T, cu_seqlens)
    y = torch.empty_like(x)
    final = x.new_zeros(len(spans), D, W - 1)
    for n, (row, bos, eos) in enumerate(spans):
        s0 = initial_state[n].float() if initial_state is not None else x.new_zeros(D, W - 1, dtype=torch.float32)
        window = torch.cat([s0.T, x[row, bos:eos].float()])  # [W - 1 + T, D]
        if eos > bos:
            y[row, bos:eos] = window_conv(window, weight, eos - bos).to(x.dtype)
        final[n] = window[window.shape[0] - (W - 1) :].T.to(x.dtype)
    return y, (final if output_final_state else None)


def short_conv_update_torch(x, weight, conv_state_pool, slots, intermediate_states):
    """Arguments and results as in `dayone.kernels.short_conv.short_conv_update` (per token, `window_conv`)."""
    squeeze = x.dim() == 2
    xs = x[:, None] if squeeze else x
    _, T, D = xs.shape
    weight = weight.reshape(D, -1).float()
    W = weight.shape[1]
    live = slots.long() >= 0
    idx = slots.long()[live]
    window = torch.cat([conv_state_pool[idx].float().transpose(1, 2), xs[live].float()], dim=1)  # [n, W - 1 + T, D]
    y = torch.zeros_like(xs)
    # One token at a time on a contiguous [n, W, D] window, as decode (T = 1) does: verify's outputs are then
    # bitwise decode's on any CPU (a tensor's vector-loop tail, which depends on its size, rounds differently).
    for t in range(T):
        y[live, t] = window_conv(window[:, t : t + W].contiguous(), weight, 1)[:, 0].to(x.dtype)
    if intermediate_states is None:
        conv_state_pool[idx] = window[:, T:].transpose(1, 2).to(conv_state_pool.dtype)
    else:  # the state after token t is window[t + 1 : t + W], as [D, W - 1]
        intermediate_states[live] = window.unfold(1, W - 1, 1)[:, 1:].to(intermediate_states.dtype)
    return y[:, 0] if squeeze else y
