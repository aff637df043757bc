"""Chunked KDA forward in vectorised torch: the CPU fast tier, the WY / UT-transform algorithm of chunk.py in matmuls.

A few heads at a time (`heads_per_pass`), every chunk of every (packed) sequence is prepared at once; only the state
passing walks the chunks, batched over sequences. Per chunk of BT = 64 tokens, with G the in-chunk cumsum of the
log-decay (G <= 0, decreasing):
    A_kk[i, j] = beta_i sum_c k_ic k_jc exp(G_ic - G_jc)   (j < i)
    A_qk[i, j] =        sum_c q_ic k_jc exp(G_ic - G_jc)   (j <= i)
    [w | u] = (I + A_kk)^-1 diag(beta) [k * exp(G) | v]     (a triangular inverse and one matmul)
    v' = u - w S;  o = (q * exp(G)) S + A_qk v';  S = diag(exp(G_last)) S + (k * exp(G_last - G))^T v'
A is built in sub-chunks of BS = 16. An off-diagonal block (rows in sub-chunk a, columns before it) is one matmul of
k_i exp(G_i - G_r) and k_j exp(G_r - G_j), r the end of sub-chunk a - 1: i > r >= j, so both factors are <= 1 and an
underflowing factor means the true product underflows too. A diagonal block takes exp(G_i - G_j) per pair, i >= j.
Nothing is factored as exp(G_i) * exp(-G_j): at the safe gate's bound of -5 per token that is exp(320) in a chunk.
Every exponent is summed from log-decays of one sign, never taken as a difference of cumsums, which after a strong
decay are large and lose the small decays between them (a 1e-4 relative error where the reference has 1e-7).
"""

from __future__ import annotations

import itertools

import torch
from dayone.kernels.kda.chunk import CHUNK
from dayone.kernels.kda.chunk import MIN_LOG_DECAY as TRITON_MIN_LOG_DECAY
from dayone.kernels.kda.reference import prepare_inputs
from dayone.kernels.packed_sequences import sequence_bounds

SUBCHUNK = 16
# Decay factors below e^-60 (9e-27) are taken as e^-60, which moves a result by at most e^-60 times the term it scales:
# torch's CPU exp is 10-40x slower where its result is subnormal or zero (inputs below -87), and so are products
# of subnormals; a chunk at the safe gate's bound reaches -320.
MIN_LOG_DECAY = float(TRITON_MIN_LOG_DECAY.value)


def decay(log_decay: torch.Tensor) -> torch.Tensor:
    """exp of a (summed) log-decay, floored at exp(MIN_LOG_DECAY)."""
    return log_decay.clamp(min=MIN_LOG_DECAY).exp()


def chunk_index(bounds: list[int], pad: int, chunk: int = CHUNK) -> tuple[torch.Tensor, list[int], list[int]]:
    """Token rows of every chunk of every sequence, [C, chunk] (`pad` past a sequence's end), first chunk, counts."""
    rows, counts = [], []
    for bos, eos in itertools.pairwise(bounds):
        counts.append(-(-(eos - bos) // chunk))
        tok = torch.arange(bos, bos + counts[-1] * chunk)
        rows.append(torch.where(tok < eos, tok, pad))
    first = [0, *itertools.accumulate(counts)][:-1]
    return (torch.cat(rows) if rows else torch.zeros(0, dtype=torch.long)).view(-1, chunk), first, counts


def suffix_sum(x: torch.Tensor, dim: int) -> torch.Tensor:
    """Exclusive suffix sums along dim: out[i] = sum_{t > i} x[t], summed from the end (no cancellation)."""
    inclusive = x.flip(dim).cumsum(dim).flip(dim)
    return torch.cat([inclusive.narrow(dim, 1, x.shape[dim] - 1), torch.zeros_like(x.narrow(dim, 0, 1))], dim)


def intra_chunk(q, k, g, beta, sub: int = SUBCHUNK):
    """A_kk (strictly lower, times beta_i) and A_qk (lower) of each chunk.

    q, k, g: [C, H, BT, K] (g the per-token log-decay, <= 0); beta: [C, H, BT]. Returns A_kk, A_qk: [C, H, BT, BT].
    Every exponent G_i - G_j is a sum of log-decays of one sign, never a difference of two cumsums: after a strong
    decay a cumsum is large, and the difference of two large cumsums loses the small decay between them.
    """
    C, H, BT, K = q.shape
    NS = BT // sub
    Akk = q.new_zeros(C, H, BT, BT)
    Aqk = q.new_zeros(C, H, BT, BT)
    gs = g.view(C, H, NS, sub, K)
    prefix = gs.cumsum(3)  # through row i of its sub-chunk
    after = suffix_sum(gs, 3)  # after row j, to the end of its sub-chunk
    # Off-diagonal blocks, rows of sub-chunk a against every column before it, both factors relative to the end of
    # sub-chunk a - 1: back[j] = sum of log-decays after j up to there.
    back = after[:, :, 0]
    for a in range(1, NS):
        lo, hi = a * sub, (a + 1) * sub
        left = decay(prefix[:, :, a])
        right = (k[:, :, :lo] * decay(back)).transpose(-1, -2)
        Akk[:, :, lo:hi, :lo] = (k[:, :, lo:hi] * left) @ right
        Aqk[:, :, lo:hi, :lo] = (q[:, :, lo:hi] * left) @ right
        back = torch.cat([back + prefix[:, :, a, -1:], after[:, :, a]], 2)
    # Diagonal blocks, all sub-chunks at once, one band i - j = d at a time: span[j] = sum of g over (j, j + d].
    qs, ks = q.view(C, H, NS, sub, K), k.view(C, H, NS, sub, K)
    Akk_d, Aqk_d = (A.view(C, H, NS, sub, NS, sub).diagonal(dim1=2, dim2=4) for A in (Akk, Aqk))  # [C, H, sub, sub, NS]
    span = torch.zeros_like(gs)
    for d in range(sub):
        if d:
            span = span[..., :-1, :] + gs[..., d:, :]
        kd = decay(span) * ks[..., : sub - d, :]
        Aqk_d.diagonal(-d, 2, 3)[:] = (qs[..., d:, :] * kd).sum(-1)
        if d:
            Akk_d.diagonal(-d, 2, 3)[:] = (ks[..., d:, :] * kd).sum(-1)
    return Akk * beta[..., None], Aqk


def heads_per_pass(C: int, K: int, V: int) -> int:
    """Heads prepared and walked together: about a million elements per [C, heads, BT, K] tensor (4 MB), so the
    dozen intermediates of a pass stay near the caches instead of streaming through memory."""
    return max(1, 2**20 // (max(C, 1) * CHUNK * max(K, V)))


def padded_tokens(x: torch.Tensor) -> torch.Tensor:
    """[B, T, H(, D)] -> [B * T + 1, H, D] (D = 1 for beta), the last row zero: the padding of partial chunks gathers
    it, and with q = k = v = beta = 0 and no decay a padded token changes neither the outputs nor the state."""
    B, T, H = x.shape[:3]
    x = x.reshape(B * T, H, x.shape[3] if x.dim() == 4 else 1)
    return torch.cat([x, x.new_zeros(1, *x.shape[1:])])


def packed_inputs(q, k, v, g, beta, A_log, dt_bias, gate, lower_bound, scale, cu_seqlens, use_qk_l2norm, beta_logits):
    """The prologue of both torch chunked forwards: `prepare_inputs`' q, k, log-decay, beta and v in fp32 as
    `padded_tokens` [B * T + 1, H, D] each, and the chunk index of the sequences (`chunk_index`, rows on q's device).

    Returns ([qn, kn, v, log_decay, beta], rows [C, CHUNK], first chunk per sequence, chunk count per sequence).
    """
    B, T = q.shape[:2]
    qn, kn, log_decay, b = prepare_inputs(
        q, k, g, beta, A_log, dt_bias, gate, lower_bound, scale, use_qk_l2norm, beta_logits
    )
    rows, first, counts = chunk_index(sequence_bounds(B, T, cu_seqlens), pad=B * T)
    return [padded_tokens(x) for x in (qn, kn, v.float(), log_decay, b)], rows.to(q.device), first, counts


def wy_transform(qc, kc, vc, gc, bc):
    """The state-independent part of each chunk, the same arithmetic for the in-place and the autograd forward.

    qc, kc, gc: [C, h, BT, K]; vc: [C, h, BT, V]; bc: [C, h, BT]. Returns w [C, h, BT, K], u [C, h, BT, V],
    q * exp(G) [C, h, BT, K], (k * exp(G_last - G))^T [C, h, K, BT], A_qk [C, h, BT, BT] and exp(G_last) [C, h, K, 1].
    """
    K = qc.shape[-1]
    Akk, Aqk = intra_chunk(qc, kc, gc, bc)
    eG = decay(gc.cumsum(2))  # decay from the chunk start through token i
    # (I + A_kk)^-1 once, then one matmul: faster on the CPU than solving for the K + V right-hand sides.
    eye = torch.eye(CHUNK, device=qc.device)
    inverse = torch.linalg.solve_triangular(Akk + eye, eye.expand_as(Akk), upper=False, unitriangular=True)
    wu = inverse @ (bc[..., None] * torch.cat([kc * eG, vc], -1))
    kg = (kc * decay(suffix_sum(gc, 2))).transpose(-1, -2)  # decay after token i to the chunk end
    return wu[..., :K], wu[..., K:], qc * eG, kg, Aqk, eG[:, :, -1, :, None]


def chunk_heads(qc, kc, vc, gc, bc, S, first, counts):
    """The chunked forward of some heads. qc, kc, gc: [C, h, BT, K]; vc: [C, h, BT, V]; bc: [C, h, BT];
    S: [N, h, K, V] initial states, updated in place to the final ones. Returns o [C, h, BT, V]."""
    N = S.shape[0]
    dev = qc.device
    w, u, qg, kg, Aqk, chunk_decay = wy_transform(qc, kc, vc, gc, bc)
    o = torch.empty_like(vc)
    for c in range(max(counts, default=0)):
        seqs = [n for n in range(N) if counts[n] > c]
        live = slice(None) if len(seqs) == N else torch.tensor(seqs, device=dev)
        ids = torch.tensor([first[n] + c for n in seqs], device=dev)
        S_c = S[live]
        vn = u[ids] - w[ids] @ S_c
        o[ids] = qg[ids] @ S_c + Aqk[ids] @ vn
        S[live] = S_c * chunk_decay[ids] + kg[ids] @ vn
    return o


def chunk_kda_torch(
    q, k, v, g, beta, A_log, dt_bias, gate, lower_bound, scale, initial_state, output_final_state,
    cu_seqlens, use_qk_l2norm, beta_logits,
):  # fmt: skip
    """Arguments and results as in `dayone.kernels.kda.chunk_kda`."""
    flat, rows, first, counts = packed_inputs(
        q, k, v, g, beta, A_log, dt_bias, gate, lower_bound, scale, cu_seqlens, use_qk_l2norm, beta_logits
    )
    B, T, H, K = q.shape
    V = v.shape[-1]
    C = rows.shape[0]
    N = len(first)
    S = initial_state.float().clone() if initial_state is not None else torch.zeros(N, H, K, V, device=q.device)
    out = q.new_zeros(B * T + 1, H, V, dtype=torch.float32)
    step = heads_per_pass(C, K, V)
    for h in range(0, H, step):
        heads = slice(h, h + step)
        qc, kc, vc, gc, bc = (x[rows, heads].movedim(2, 1).contiguous() for x in flat)  # [C, h, BT, ...]
        S_h = S[:, heads].contiguous()
        o = chunk_heads(qc, kc, vc, gc, bc[..., 0], S_h, first, counts)
        S[:, heads] = S_h
        out[rows.reshape(-1), heads] = o.movedim(1, 2).reshape(C * CHUNK, o.shape[1], V)
    return out[: B * T].view(B, T, H, V).to(v.dtype), (S if output_final_state else None)
