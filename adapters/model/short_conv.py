"""KDA's short convolution: causal, depthwise, no bias, SiLU after; with a carried window for decode."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def causal_depthwise_conv(x: torch.Tensor, weight: torch.Tensor, window: torch.Tensor | None) -> torch.Tensor:
    """SiLU(causal depthwise conv), fp32 math, returned in x's dtype.

    x: [T, C] new inputs of one sequence; weight: [C, W] (tap W-1 multiplies the current token);
    window: [W-1, C] inputs before x (None: zeros, the start of a sequence).
    out[t, c] = silu(sum_j weight[c, j] * xx[t + j, c]) with xx = window ++ x.
    """
    T, C = x.shape
    W = weight.shape[1]
    if window is None:
        window = x.new_zeros(W - 1, C)
    xx = torch.cat([window.to(x.dtype), x]).float()
    w = weight.float()
    out = sum(w[:, j] * xx[j : j + T] for j in range(W))
    return F.silu(out).to(x.dtype)


def next_window(x: torch.Tensor, window: torch.Tensor | None, width: int) -> torch.Tensor:
    """The last width-1 inputs after appending x [T, C] to window [width-1, C] (None: zeros)."""
    if width == 1:
        return x.new_zeros(0, x.shape[1])
    if window is None:
        window = x.new_zeros(width - 1, x.shape[1])
    return torch.cat([window.to(x.dtype), x])[-(width - 1) :]
