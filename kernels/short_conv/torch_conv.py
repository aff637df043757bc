"""Short convolution in vectorised torch (F.conv1d over each packed sequence): the CPU fast tier for conv.py."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def short_conv_torch(x, weight, cu_seqlens, initial_state, output_final_state):
    """Arguments and results as in `dayone.kernels.short_conv.short_conv`."""
    B, T, D = x.shape
    weight = weight.reshape(D, -1).float()
    W = weight.shape[1]
    if cu_seqlens is None:
        spans = [(b, 0, T) for b in range(B)]
    else:
        bounds = cu_seqlens.tolist()
        spans = [(0, bounds[n], bounds[n + 1]) for n in range(len(bounds) - 1)]
    y = torch.empty_like(x)
    final = x.new_zeros(len(spans), D, W - 1)
    for n, (row, bos, eos) in enumerate(spans):
        s0 = initial_state[n].float() if initial_state is not None else x.new_zeros(D, W - 1, dtype=torch.float32)
        window = torch.cat([s0, x[row, bos:eos].float().T], dim=1)  # [D, W - 1 + T]
        if eos > bos:
            y[row, bos:eos] = F.silu(F.conv1d(window[None], weight[:, None], groups=D)[0].T).to(x.dtype)
        final[n] = window[:, window.shape[1] - (W - 1) :].to(x.dtype)
    return y, (final if output_final_state else None)


def short_conv_update_torch(x, weight, conv_state_pool, slots):
    """Arguments and results as in `dayone.kernels.short_conv.short_conv_update`."""
    live = slots.long() >= 0
    idx = slots.long()[live]
    window = torch.cat([conv_state_pool[idx].float(), x[live].float()[..., None]], dim=-1)  # [n, D, W]
    y = torch.zeros_like(x)
    y[live] = F.silu((window * weight.reshape(x.shape[1], -1).float()).sum(-1)).to(x.dtype)
    conv_state_pool[idx] = window[..., 1:].to(conv_state_pool.dtype)
    return y
