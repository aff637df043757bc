"""Chunked KDA forward in vectorised torch: the CPU fast tier, the same algorithm as the Triton kernels in chunk.py.

Vectorised over heads and chunks for the intra-chunk WY form, a Python loop over chunks for the state.
"""

from __future__ import annotations

import torch
from dayone.kernels.kda.chunk import CHUNK
from dayone.kernels.kda.reference import prepare_inputs


def chunk_sequence(q, k, v, log_decay, beta, state, chunk: int = CHUNK):
    """One sequence. q, k, log_decay: [T, H, K] fp32 (q already scaled); v: [T, H, V]; beta: [T, H]; state: [H, K, V].

    Returns o [T, H, V] and the final state [H, K, V], fp32.
    """
    T, H, _K = q.shape
    V = v.shape[-1]
    NT = -(-T // chunk)
    pad = NT * chunk - T

    def blocks(x):  # [T, H, ...] -> [H, NT, BT, ...]; padded tokens have k = v = beta = 0 and no decay
        x = torch.nn.functional.pad(x, (0, 0) * (x.dim() - 2) + (0, 0, 0, pad))
        return x.reshape(NT, chunk, H, *x.shape[2:]).movedim(2, 0)

    q, k, v, G = blocks(q), blocks(k), blocks(v), blocks(log_decay).cumsum(2)
    beta = blocks(beta[..., None])[..., 0]
    rows = torch.arange(chunk)

    # Column j of A_kk / A_qk from exp(G_i - G_j), i >= j (<= 1, never overflows).
    Akk = q.new_zeros(H, NT, chunk, chunk)
    Aqk = q.new_zeros(H, NT, chunk, chunk)
    for j in range(chunk):
        rel = torch.where((rows >= j)[:, None], G - G[:, :, j : j + 1], float("-inf"))
        kd = rel.exp() * k[:, :, j : j + 1]
        Akk[..., j] = (k * kd).sum(-1)
        Aqk[..., j] = (q * kd).sum(-1)
    Akk = torch.where(rows[:, None] > rows[None, :], Akk * beta[..., None], 0.0)
    eye = torch.eye(chunk).expand_as(Akk)
    T_ = torch.linalg.solve_triangular(eye + Akk, eye, upper=False, unitriangular=True) * beta[..., None, :]
    w = T_ @ (k * G.exp())
    u = T_ @ v
    G_last = G[:, :, -1:]
    qg = q * G.exp()
    kg = k * (G_last - G).exp()

    S = state.clone()
    o = q.new_zeros(H, NT, chunk, V)
    for c in range(NT):
        vn = u[:, c] - w[:, c] @ S
        o[:, c] = qg[:, c] @ S + Aqk[:, c] @ vn
        S = S * G_last[:, c, 0, :, None].exp() + kg[:, c].transpose(-1, -2) @ vn
    return o.movedim(0, 2).reshape(NT * chunk, H, V)[:T], S


def chunk_kda_torch(
    q, k, v, g, beta, A_log, dt_bias, gate, lower_bound, scale, initial_state, output_final_state,
    cu_seqlens, use_qk_l2norm, beta_logits,
):  # fmt: skip
    """Arguments and results as in `dayone.kernels.kda.chunk_kda`."""
    B, T, H, K = q.shape
    V = v.shape[-1]
    qn, kn, log_decay, b = prepare_inputs(
        q, k, g, beta, A_log, dt_bias, gate, lower_bound, scale, use_qk_l2norm, beta_logits
    )
    vf = v.float()
    if cu_seqlens is None:
        spans = [(n, 0, T) for n in range(B)]
    else:
        bounds = cu_seqlens.tolist()
        spans = [(0, bounds[n], bounds[n + 1]) for n in range(len(bounds) - 1)]
    o = torch.zeros(B, T, H, V, device=q.device)
    final = torch.zeros(len(spans), H, K, V, device=q.device)
    for n, (row, bos, eos) in enumerate(spans):
        s0 = initial_state[n].float() if initial_state is not None else final[n]
        if eos == bos:
            final[n] = s0
            continue
        sl = (row, slice(bos, eos))
        o[sl], final[n] = chunk_sequence(qn[sl], kn[sl], vf[sl], log_decay[sl], b[sl], s0)
    return o.to(v.dtype), (final if output_final_state else None)
