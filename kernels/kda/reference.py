"""Kimi Delta Attention in plain fp32 torch, token by token: the truth every KDA kernel is compared with.

Written for clarity, not speed. Per head, with state S in R^{K x V}:
    S <- diag(exp(log_decay)) S;  S <- S + beta k (v - S^T k)^T;  o = S^T q
after q, k are L2-normalised (eps 1e-6) and q is scaled by K^-0.5, as in fla's `use_qk_l2norm_in_kernel`.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

L2NORM_EPS = 1e-6


def l2norm(x: torch.Tensor, eps: float = L2NORM_EPS) -> torch.Tensor:
    """x / sqrt(sum(x^2) + eps) over the last dim, in fp32 (fla's l2norm convention)."""
    x = x.float()
    return x / torch.sqrt(x.pow(2).sum(-1, keepdim=True) + eps)


def kda_gate(
    g: torch.Tensor,
    A_log: torch.Tensor | None,
    dt_bias: torch.Tensor | None,
    gate: str,
    lower_bound: float = -5.0,
) -> torch.Tensor:
    """Per-channel log-decay from the raw gate, fp32.

    g: [..., H, K] raw gate (gate="plain"/"safe") or already the log-decay (gate="none").
    A_log: [H]; dt_bias: [H*K].
    plain: -exp(A_log) * softplus(g + dt_bias)            (Kimi Linear)
    safe:  lower_bound * sigmoid(exp(A_log) * (g + dt_bias))  (Kimi K3; in (lower_bound, 0))
    """
    g = g.float()
    if gate == "none":
        return g
    H, K = g.shape[-2:]
    x = g + dt_bias.float().view(H, K) if dt_bias is not None else g
    a = A_log.float().view(H, 1).exp()
    if gate == "plain":
        return -a * F.softplus(x)
    if gate == "safe":
        return lower_bound * torch.sigmoid(a * x)
    raise ValueError(f"gate must be 'plain', 'safe' or 'none', got {gate!r}")


def prepare_inputs(q, k, g, beta, A_log, dt_bias, gate, lower_bound, scale, use_qk_l2norm, beta_logits):
    """The in-kernel preprocessing, spelled out: normalised and scaled q, normalised k, log-decay, beta (all fp32)."""
    K = q.shape[-1]
    scale = K**-0.5 if scale is None else scale
    q = (l2norm(q) if use_qk_l2norm else q.float()) * scale
    k = l2norm(k) if use_qk_l2norm else k.float()
    log_decay = kda_gate(g, A_log, dt_bias, gate, lower_bound)
    beta = torch.sigmoid(beta.float()) if beta_logits else beta.float()
    return q, k, log_decay, beta


def recurrence(q, k, v, log_decay, beta, state):
    """One sequence, token by token. q, k, log_decay: [T, H, K]; v: [T, H, V]; beta: [T, H]; state: [H, K, V].

    Returns o [T, H, V] and the final state [H, K, V], all fp32.
    """
    S = state.clone()
    out = []
    for t in range(q.shape[0]):
        S = S * log_decay[t].exp()[..., None]
        kS = torch.einsum("hk,hkv->hv", k[t], S)
        S = S + beta[t][:, None, None] * k[t][..., None] * (v[t] - kS)[:, None, :]
        out.append(torch.einsum("hk,hkv->hv", q[t], S))
    o = torch.stack(out) if out else v.new_zeros(0, *v.shape[1:])
    return o, S


def kda_reference(
    q, k, v, g, beta, A_log=None, dt_bias=None, gate="plain", lower_bound=-5.0, scale=None, initial_state=None,
    cu_seqlens=None, use_qk_l2norm=True, beta_logits=True,
) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
    """KDA over (packed) sequences, arguments as in `dayone.kernels.kda.chunk_kda`. Returns (o, final state), fp32."""
    B, T, H, K = q.shape
    V = v.shape[-1]
    qn, kn, log_decay, b = prepare_inputs(
        q, k, g, beta, A_log, dt_bias, gate, lower_bound, scale, use_qk_l2norm, beta_logits
    )
    v = v.float()
    # (row, start, end) of each sequence: B rows whole, or the cu_seqlens spans of row 0 (this file is shipped alone
    # inside generated packages, so it imports nothing of dayone's: kernels/packed_sequences.py says the same)
    if cu_seqlens is None:
        spans = [(n, 0, T) for n in range(B)]
    else:
        bounds = cu_seqlens.tolist()
        spans = [(0, bounds[n], bounds[n + 1]) for n in range(len(bounds) - 1)]
    o = torch.zeros(B, T, H, V)
    final = torch.zeros(len(spans), H, K, V)
    for n, (row, bos, eos) in enumerate(spans):
        s0 = initial_state[n].float() if initial_state is not None else torch.zeros(H, K, V)
        o[row, bos:eos], final[n] = recurrence(
            qn[row, bos:eos], kn[row, bos:eos], v[row, bos:eos], log_decay[row, bos:eos], b[row, bos:eos], s0
        )
    return o, final


def kda_decode_reference(q, k, v, g, beta, state_pool, slots, A_log=None, dt_bias=None, gate="plain", **kw):
    """Decode/verify truth: per request n, run the T tokens from state_pool[slots[n]].

    q, k, g: [N, T, H, K]; v: [N, T, H, V]; beta: [N, T, H]; state_pool: [P, H, K, V]; slots: [N].
    Returns o [N, T, H, V] fp32 and the states after every token [N, T, H, K, V] fp32 (the pool is not touched).
    """
    N, T, H, K = q.shape
    o = torch.zeros(N, T, H, v.shape[-1])
    states = torch.zeros(N, T, H, K, v.shape[-1])
    for n in range(N):
        S = state_pool[int(slots[n])].float()
        for t in range(T):
            o_t, S = kda_reference(
                q[n : n + 1, t : t + 1], k[n : n + 1, t : t + 1], v[n : n + 1, t : t + 1],
                g[n : n + 1, t : t + 1], beta[n : n + 1, t : t + 1], A_log, dt_bias, gate,
                initial_state=S[None], **kw,
            )  # fmt: skip
            o[n, t], S = o_t[0, 0], S[0]
            states[n, t] = S
    return o, states
