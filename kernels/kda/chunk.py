"""Chunked KDA forward in Triton (prefill and training forward), in two kernels as fla does.

1. `kda_chunk_prepare_kernel`, one program per (chunk, head), all chunks in parallel: L2-normalise q, k, compute
   the log-decay g from the raw gate, beta = sigmoid(logits), then the WY form of the chunk:
       A_kk[i, j] = beta_i sum_c k_ic k_jc exp(G_ic - G_jc)    (j < i)
       A_qk[i, j] =        sum_c q_ic k_jc exp(G_ic - G_jc)    (j <= i)
       T = (I + A_kk)^-1 diag(beta);  w = T (k * exp(G));  u = T v
   with G the in-chunk cumsum of g. G_i - G_j is never taken as a difference of cumsums: after a strong decay both
   are large and their difference loses the small decays between them (1e-4 relative where the reference has 1e-7).
   Every exponent is a sum of the log-decays over (j, i] (all <= 0, so no cancellation and nothing above 1), as in
   torch_chunk.py. A is built in sub-chunks of BS = 16: an off-diagonal block (rows in sub-chunk a, columns before
   it) is a tl.dot of q_i or k_i times exp(sum over (r, i]) and k_j times exp(sum over (j, r]), r the last row of
   sub-chunk a - 1; a diagonal block takes its exponent per pair, summed from the column's side. The factored form
   exp(G_i) * exp(-G_j) would overflow fp32: per-channel decays over 64 tokens reach exp(-320).
2. `kda_chunk_output_kernel`, one program per (sequence, head, V block), walking the chunks of its sequence:
       v' = u - w S;  o = (q * exp(G)) S + A_qk v';  S = diag(exp(G_last)) S + (k * exp(G_last - G))^T v'
   where exp(G_last - G_i) is likewise the decay summed over (i, last].
Head dims need not be powers of two (96 and 192 are in use): a tile is K or V rounded up to one, at least 16
(`tile_width`); the padding channels load as zeros and nothing is stored to them. Zero q, k, v channels add nothing
to any dot, and a padding channel's decay multiplies a state row or column that stays zero.
Intermediates are fp32 so the only rounding to the input dtype is the output. Decay factors are floored at
exp(MIN_LOG_DECAY), as in torch_chunk.py, which moves a result by at most e^-60 times the term it scales.
Every tl.dot takes fp32 tiles, which a GPU would multiply in TF32 (10 mantissa bits, ~5e-4 relative per product) by
default: with fp32 inputs the dots run in IEEE fp32, since the fp32 reference is the judge (1e-4 relative RMS, the
fp32_kernel row); with bf16/fp16 inputs (8 or 11 mantissa bits, already rounded) TF32 loses nothing the inputs had
and keeps the tensor cores. The interpreter computes every dot in fp32 whatever it is told (docs/kernels.md).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from dayone.kernels.packed_sequences import sequence_bounds
from dayone.spec.kernel_limits import tile_width  # the spec loader refuses head dims whose tiles cannot fit

CHUNK = 64
GATES = {"none": 0, "plain": 1, "safe": 2}
# Decay factors are floored at exp(MIN_LOG_DECAY); torch_chunk.py imports this value so both paths floor alike.
MIN_LOG_DECAY = tl.constexpr(-60.0)


@triton.jit
def decay(log_decay):
    """exp of a (summed) log-decay, floored at exp(MIN_LOG_DECAY)."""
    return tl.exp(tl.maximum(log_decay, MIN_LOG_DECAY))


@triton.jit
def dot(a, b, IEEE: tl.constexpr):
    """a @ b of fp32 tiles: IEEE fp32 for fp32 inputs, TF32 for 16-bit ones (the module docstring says why)."""
    if IEEE:
        return tl.dot(a, b, input_precision="ieee")
    else:
        return tl.dot(a, b, input_precision="tf32")


@triton.jit
def diagonal_walk_start(b_q, b_k, b_g, NS: tl.constexpr, BS: tl.constexpr, BK: tl.constexpr, BT: tl.constexpr):
    """What the diagonal-block walk starts from: q, k, g [BT, BK] as [NS, BS, BK] (sub-chunk, row in it, channel),
    the row index ii [1, BS, 1], at_col [NS, 1, BT] (each column's offset from its sub-chunk's start) and the span
    before the first step, zero [NS, BS, BK]."""
    q3 = tl.reshape(b_q, [NS, BS, BK])
    k3 = tl.reshape(b_k, [NS, BS, BK])
    g3 = tl.reshape(b_g, [NS, BS, BK])
    ii = tl.arange(0, BS)[None, :, None]
    at_col = tl.arange(0, BT)[None, None, :] - (tl.arange(0, NS) * BS)[:, None, None]
    return q3, k3, g3, ii, at_col, tl.zeros([NS, BS, BK], dtype=tl.float32)


@triton.jit
def span_step(span, g3, ii, jj):
    """The walk's step back to column jj: span[i] = sum of g over (jj, i] for rows i > jj (0 elsewhere), grown from
    the span over (jj + 1, i] by g_{jj+1}, a sum of one sign."""
    return tl.where(ii > jj, span + tl.sum(tl.where(ii == jj + 1, g3, 0.0), 1)[:, None, :], 0.0)


@triton.jit
def log_decay_tile(g, A_log, dt_bias, off, mask, ck, in_k, lower_bound, GATE: tl.constexpr):
    """The per-channel log-decay of the rows at `off` from the raw gate; 0 (no decay) where `mask` is off.

    A_log and dt_bias point at this head's entries; in_k marks the channels of ck that are inside the head."""
    b_g = tl.load(g + off, mask=mask, other=0.0).to(tl.float32)
    if GATE != 0:
        b_g = b_g + tl.load(dt_bias + ck, mask=in_k, other=0.0).to(tl.float32)[None, :]
        a = tl.exp(tl.load(A_log).to(tl.float32))
        if GATE == 1:
            # softplus with torch's threshold of 20, where it returns x itself
            b_g = -a * tl.where(b_g > 20.0, b_g, tl.log(1.0 + tl.exp(b_g)))
        else:
            b_g = lower_bound * tl.sigmoid(a * b_g)
    return tl.where(mask, b_g, 0.0)


@triton.jit
def kda_chunk_prepare_kernel(
    q, k, v, g, beta, A_log, dt_bias, cu_seqlens, chunk_indices,
    qg, kg, w, u, Aqk, gl,
    scale, lower_bound, H,
    K: tl.constexpr, V: tl.constexpr, BT: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr,
    GATE: tl.constexpr, L2NORM: tl.constexpr, BETA_SIGMOID: tl.constexpr,
):  # fmt: skip
    """BK, BV: K and V rounded up by tile_width; the whole head is one tile."""
    BS: tl.constexpr = 16
    NS: tl.constexpr = BT // BS
    IEEE: tl.constexpr = q.dtype.element_ty == tl.float32
    i_c = tl.program_id(0)
    i_h = tl.program_id(1)
    i_n = tl.load(chunk_indices + 2 * i_c)
    i_t = tl.load(chunk_indices + 2 * i_c + 1)
    bos = tl.load(cu_seqlens + i_n)
    eos = tl.load(cu_seqlens + i_n + 1)
    start = bos + i_t * BT
    n_valid = tl.minimum(eos - start, BT)

    rows = tl.arange(0, BT)
    ck = tl.arange(0, BK)
    cv = tl.arange(0, BV)
    in_k = ck < K
    valid = rows < n_valid
    tok = (start + rows).to(tl.int64)
    off_k = (tok[:, None] * H + i_h) * K + ck[None, :]
    m_k = valid[:, None] & in_k[None, :]
    m_v = valid[:, None] & (cv < V)[None, :]

    b_q = tl.load(q + off_k, mask=m_k, other=0.0).to(tl.float32)
    b_k = tl.load(k + off_k, mask=m_k, other=0.0).to(tl.float32)
    if L2NORM:
        b_q = b_q / tl.sqrt(tl.sum(b_q * b_q, 1) + 1e-6)[:, None]
        b_k = b_k / tl.sqrt(tl.sum(b_k * b_k, 1) + 1e-6)[:, None]
    b_q = b_q * scale
    A_log_h, dt_bias_h = A_log + i_h, dt_bias + i_h * K
    b_g = log_decay_tile(g, A_log_h, dt_bias_h, off_k, m_k, ck, in_k, lower_bound, GATE)
    # g of the next row (0 past the last valid one): sums over (j, r] are suffix sums of it from r - 1 back to j.
    m_next = (rows + 1 < n_valid)[:, None] & in_k[None, :]
    b_gn = log_decay_tile(g, A_log_h, dt_bias_h, off_k + H * K, m_next, ck, in_k, lower_bound, GATE)

    b_beta = tl.load(beta + tok * H + i_h, mask=valid, other=0.0).to(tl.float32)
    if BETA_SIGMOID:
        b_beta = tl.sigmoid(b_beta)
    b_beta = tl.where(valid, b_beta, 0.0)

    # Stored as soon as they are known, so that fewer [BT, K] tiles are live at once: at K = 128 and 8 warps this
    # kernel sits at 255 registers, and exp(G) is recomputed for w at the end rather than kept.
    tl.store(qg + off_k, b_q * decay(tl.cumsum(b_g, 0)), mask=m_k)
    tl.store(kg + off_k, b_k * decay(tl.cumsum(b_gn, 0, reverse=True)), mask=m_k)
    tl.store(gl + (i_c * H + i_h) * K + ck, decay(tl.sum(b_g, 0)), mask=in_k)

    # Diagonal blocks, all sub-chunks at once, one column j (row jj of each sub-chunk) at a time from the last:
    # span[i] = sum of g over (j, i] grows by g_{j+1} as j steps back, a sum of one sign.
    q3, k3, g3, ii, at_col, span = diagonal_walk_start(b_q, b_k, b_g, NS, BS, BK, BT)
    D_kk = tl.zeros([NS, BS, BT], dtype=tl.float32)
    D_qk = tl.zeros([NS, BS, BT], dtype=tl.float32)
    for d in range(BS):
        jj = BS - 1 - d
        span = span_step(span, g3, ii, jj)
        kd = tl.where(ii >= jj, decay(span), 0.0) * tl.sum(tl.where(ii == jj, k3, 0.0), 1)[:, None, :]
        D_kk = tl.where(at_col == jj, tl.sum(k3 * kd, 2)[:, :, None], D_kk)
        D_qk = tl.where(at_col == jj, tl.sum(q3 * kd, 2)[:, :, None], D_qk)
    b_Akk = tl.reshape(D_kk, [BT, BT])
    b_Aqk = tl.reshape(D_qk, [BT, BT])

    # Off-diagonal blocks: rows of sub-chunk a against the columns before it, both factors relative to r = a*BS - 1.
    sub = rows // BS
    for a in tl.static_range(1, NS):
        left = tl.where((sub == a)[:, None], decay(tl.cumsum(tl.where((rows > a * BS - 1)[:, None], b_g, 0.0), 0)), 0.0)
        right = tl.cumsum(tl.where((rows < a * BS - 1)[:, None], b_gn, 0.0), 0, reverse=True)
        b_kr = tl.trans(tl.where((sub < a)[:, None], decay(right), 0.0) * b_k)
        b_Akk += dot(b_k * left, b_kr, IEEE)
        b_Aqk += dot(b_q * left, b_kr, IEEE)
    b_Akk = tl.where(rows[:, None] > rows[None, :], b_Akk * b_beta[:, None], 0.0)
    tl.store(Aqk + (tok[:, None] * H + i_h) * BT + rows[None, :], b_Aqk, mask=valid[:, None])

    # (I + A_kk)^-1 by forward substitution: X_i = e_i - sum_{j<i} A_ij X_j.
    b_X = tl.where(rows[:, None] == rows[None, :], 1.0, 0.0)
    for i in range(1, n_valid):
        row = (rows == i)[:, None]
        a_i = tl.sum(tl.where(row, b_Akk, 0.0), 0)
        x_i = tl.where(rows == i, 1.0, 0.0) - tl.sum(a_i[:, None] * b_X, 0)
        b_X = tl.where(row, x_i[None, :], b_X)
    b_T = b_X * b_beta[None, :]

    tl.store(w + off_k, dot(b_T, b_k * decay(tl.cumsum(b_g, 0)), IEEE), mask=m_k)
    b_v = tl.load(v + (tok[:, None] * H + i_h) * V + cv[None, :], mask=m_v, other=0.0).to(tl.float32)
    tl.store(u + (tok[:, None] * H + i_h) * V + cv[None, :], dot(b_T, b_v, IEEE), mask=m_v)


@triton.jit
def kda_chunk_output_kernel(
    qg, kg, w, u, Aqk, gl, o, h0, ht, cu_seqlens, chunk_offsets,
    H,
    K: tl.constexpr, V: tl.constexpr, BT: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr,
    HAS_INITIAL: tl.constexpr, STORE_FINAL: tl.constexpr,
):  # fmt: skip
    """BK: K rounded up by tile_width; BV: the V block of this program, a power of two (the last may hang over V)."""
    IEEE: tl.constexpr = o.dtype.element_ty == tl.float32  # o has the inputs' dtype; the rest is fp32 scratch
    i_v = tl.program_id(0)
    i_n = tl.program_id(1)
    i_h = tl.program_id(2)
    bos = tl.load(cu_seqlens + i_n)
    eos = tl.load(cu_seqlens + i_n + 1)
    c0 = tl.load(chunk_offsets + i_n)

    rows = tl.arange(0, BT)
    ck = tl.arange(0, BK)
    cv = i_v * BV + tl.arange(0, BV)
    in_k = ck < K
    in_v = cv < V
    off_s = ((i_n * H + i_h) * K + ck[:, None]).to(tl.int64) * V + cv[None, :]
    m_s = in_k[:, None] & in_v[None, :]
    b_S = tl.zeros([BK, BV], dtype=tl.float32)
    if HAS_INITIAL:
        b_S = tl.load(h0 + off_s, mask=m_s, other=0.0)

    for c in range(tl.cdiv(eos - bos, BT)):
        tok = (bos + c * BT + rows).to(tl.int64)
        m = (tok < eos)[:, None]
        m_k = m & in_k[None, :]
        m_v = m & in_v[None, :]
        off_k = (tok[:, None] * H + i_h) * K + ck[None, :]
        off_v = (tok[:, None] * H + i_h) * V + cv[None, :]
        b_qg = tl.load(qg + off_k, mask=m_k, other=0.0)
        b_kg = tl.load(kg + off_k, mask=m_k, other=0.0)
        b_w = tl.load(w + off_k, mask=m_k, other=0.0)
        b_u = tl.load(u + off_v, mask=m_v, other=0.0)
        b_A = tl.load(Aqk + (tok[:, None] * H + i_h) * BT + rows[None, :], mask=m, other=0.0)
        b_gl = tl.load(gl + ((c0 + c) * H + i_h) * K + ck, mask=in_k, other=0.0)

        b_vn = b_u - dot(b_w, b_S, IEEE)
        b_o = dot(b_qg, b_S, IEEE) + dot(b_A, b_vn, IEEE)
        tl.store(o + off_v, b_o.to(o.dtype.element_ty), mask=m_v)
        b_S = b_S * b_gl[:, None] + dot(tl.trans(b_kg), b_vn, IEEE)

    if STORE_FINAL:
        tl.store(ht + off_s, b_S, mask=m_s)


def chunk_plan(cu_seqlens: list[int], chunk: int = CHUNK) -> tuple[list[list[int]], list[int]]:
    """Host-side chunk bookkeeping: [(sequence, chunk in sequence)] for every chunk, and each sequence's first chunk."""
    indices, offsets = [], [0]
    for n in range(len(cu_seqlens) - 1):
        count = -(-(cu_seqlens[n + 1] - cu_seqlens[n]) // chunk)
        indices += [[n, c] for c in range(count)]
        offsets.append(offsets[-1] + count)
    return indices, offsets


def pick_block_v(V: int) -> int:
    """The V block of the output kernel: at K = 128, BV = 64 with one stage fits sm_90 shared memory (two do not)."""
    return min(tile_width(V), 64)


def chunk_kda_triton(
    q, k, v, g, beta, A_log, dt_bias, gate, lower_bound, scale, initial_state, output_final_state,
    cu_seqlens, use_qk_l2norm, beta_logits,
):  # fmt: skip
    """Launch both kernels; arguments as in `dayone.kernels.kda.chunk_kda`."""
    B, T, H, K = q.shape
    V = v.shape[-1]
    dev = q.device
    bounds = sequence_bounds(B, T, cu_seqlens)
    N = len(bounds) - 1
    indices, offsets = chunk_plan(bounds)
    cu = torch.tensor(bounds, dtype=torch.int32, device=dev)
    chunk_indices = torch.tensor(indices or [[0, 0]], dtype=torch.int32, device=dev)
    chunk_offsets = torch.tensor(offsets, dtype=torch.int32, device=dev)
    q, k, v, g, beta = (x.contiguous() for x in (q, k, v, g, beta))
    dummy = torch.zeros(1, dtype=torch.float32, device=dev)
    A_log = dummy if A_log is None else A_log.float().contiguous()
    dt_bias = dummy if dt_bias is None else dt_bias.float().contiguous()

    f32 = {"dtype": torch.float32, "device": dev}
    qg, kg, w = (torch.empty(B, T, H, K, **f32) for _ in range(3))
    u = torch.empty(B, T, H, V, **f32)
    Aqk = torch.empty(B, T, H, CHUNK, **f32)
    gl = torch.empty(max(len(indices), 1), H, K, **f32)
    o = torch.empty(B, T, H, V, dtype=v.dtype, device=dev)
    ht = torch.empty(N, H, K, V, **f32)
    h0 = ht if initial_state is None else initial_state.float().contiguous()

    if indices:
        kda_chunk_prepare_kernel[(len(indices), H)](
            q, k, v, g, beta, A_log, dt_bias, cu, chunk_indices, qg, kg, w, u, Aqk, gl,
            K**-0.5 if scale is None else scale, lower_bound, H,
            K=K, V=V, BT=CHUNK, BK=tile_width(K), BV=tile_width(V), GATE=GATES[gate], L2NORM=use_qk_l2norm,
            BETA_SIGMOID=beta_logits, num_warps=8, enable_fp_fusion=True,
        )  # fmt: skip
    BV = pick_block_v(V)
    kda_chunk_output_kernel[(triton.cdiv(V, BV), N, H)](
        qg, kg, w, u, Aqk, gl, o, h0, ht, cu, chunk_offsets, H,
        K=K, V=V, BT=CHUNK, BK=tile_width(K), BV=BV, HAS_INITIAL=initial_state is not None, STORE_FINAL=True,
        num_warps=4, num_stages=1, enable_fp_fusion=True,
    )  # fmt: skip
    return o, (ht if output_final_state else None)
