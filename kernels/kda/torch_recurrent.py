"""Recurrent KDA decode/verify in vectorised torch over a state pool: the CPU fast tier for recurrent.py."""

from __future__ import annotations

import torch
from dayone.kernels.kda.reference import prepare_inputs


def kda_decode_torch(
    q, k, v, g, beta, state_pool, slots, A_log, dt_bias, gate, lower_bound, scale, use_qk_l2norm, beta_logits,
    intermediate_states,
):  # fmt: skip
    """Arguments and results as in `dayone.kernels.kda.kda_decode`; the arithmetic per token matches the kernel's."""
    N, T, H, _K = q.shape
    V = v.shape[-1]
    qn, kn, log_decay, b = prepare_inputs(
        q, k, g, beta, A_log, dt_bias, gate, lower_bound, scale, use_qk_l2norm, beta_logits
    )
    vf = v.float()
    live = slots.long() >= 0  # negative slots are padding requests
    idx = slots.long().clamp(min=0)
    S = state_pool[idx].clone()
    o = torch.zeros(N, T, H, V, dtype=v.dtype, device=q.device)
    for t in range(T):
        S = S * log_decay[:, t].exp()[..., None]
        kS = (kn[:, t, :, :, None] * S).sum(-2)
        S = S + (b[:, t, :, None] * kn[:, t])[..., None] * (vf[:, t] - kS)[:, :, None, :]
        o[:, t] = (qn[:, t, :, :, None] * S).sum(-2).to(v.dtype)
        if intermediate_states is not None:
            intermediate_states[live, t] = S[live]
    if intermediate_states is None:
        state_pool[idx[live]] = S[live]
    o[~live] = 0  # padding requests read as zeros, as in the kernel
    return o
