"""Recurrent KDA decode/verify in vectorised torch over a state pool: the CPU fast tier for recurrent.py."""

from __future__ import annotations

import torch
from dayone.kernels.kda.reference import prepare_inputs


def kda_decode_torch(
    q, k, v, g, beta, state_pool, slots, A_log, dt_bias, gate, lower_bound, scale, use_qk_l2norm, beta_logits,
    intermediate_states,
):  # fmt: skip
    """Arguments and results as in `dayone.kernels.kda.kda_decode`; the arithmetic per token matches the kernel's.

    Verify (T > 1) runs its tokens one at a time through `_decode_token`, on contiguous [N, 1, ...] copies, which is
    exactly what decode (T = 1) runs: each token's outputs and state are then bitwise those of decoding it alone,
    on any CPU. Computing all T tokens' inputs at once would not be: torch's vectorised loops hand a tensor's tail
    (numel modulo the vector width, which is 8 floats with AVX2 and 16 with AVX-512) to scalar code whose
    sigmoid, exp and fused multiply-adds round differently.
    """
    N, T, H, _K = q.shape
    V = v.shape[-1]
    live = slots.long() >= 0  # negative slots are padding requests
    idx = slots.long().clamp(min=0)
    S = state_pool[idx].clone()
    o = torch.zeros(N, T, H, V, dtype=v.dtype, device=q.device)
    for t in range(T):
        token = [x[:, t : t + 1].contiguous() for x in (q, k, v, g, beta)]
        o[:, t], S = _decode_token(
            *token, S, A_log, dt_bias, gate, lower_bound, scale, use_qk_l2norm, beta_logits
        )  # fmt: skip
        if intermediate_states is not None:
            intermediate_states[live, t] = S[live]
    if intermediate_states is None:
        state_pool[idx[live]] = S[live]
    o[~live] = 0  # padding requests read as zeros, as in the kernel
    return o


def _decode_token(q, k, v, g, beta, S, A_log, dt_bias, gate, lower_bound, scale, use_qk_l2norm, beta_logits):
    """One token per request: q, k, g [N, 1, H, K], v [N, 1, H, V], beta [N, 1, H], S [N, H, K, V] fp32.
    Returns o [N, H, V] in v's dtype and the new S."""
    qn, kn, log_decay, b = prepare_inputs(
        q, k, g, beta, A_log, dt_bias, gate, lower_bound, scale, use_qk_l2norm, beta_logits
    )
    qn, kn, log_decay, b, vf = qn[:, 0], kn[:, 0], log_decay[:, 0], b[:, 0], v[:, 0].float()
    S = S * log_decay.exp()[..., None]
    kS = (kn[..., None] * S).sum(-2)
    S = S + (b[..., None] * kn)[..., None] * (vf - kS)[:, :, None, :]
    return (qn[..., None] * S).sum(-2).to(v.dtype), S
