"""Backward of the in-chunk products A_qk and A_kk (torch_chunk.py's `intra_chunk`) in Triton: the gradients of q, k
and the log-decay g from those of the two [BT, BT] matrices of every chunk, one program per (chunk, head).

Per chunk, with E_ijc = exp(sum of g_c over (j, i]) (<= 1, floored as in chunk.py), P = dA_qk (j <= i) and
Q = dA~_kk (j < i, A~ the matrix before beta, which the caller applies in torch):
    dq_i = sum_j P_ij (k_j * E_ij)        dk_i = sum_j Q_ij (k_j * E_ij) + sum_l (P_li q_l + Q_li k_l) * E_li
and dg_t = the sum over the pairs j < t <= i of (P_ij q_i + Q_ij k_i) * k_j * E_ij, summed per block from the
factor that holds g_t (not as the reverse cumsum of q dq + k dk_row - k dk_col, which is the same sum but cancels:
measured 1.6e-5 relative on dt_bias's gradient, against 3e-7 this way). The exponents are taken as in chunk.py's prepare
kernel, never as a difference of cumsums nor as exp(G_i) * exp(-G_j): a block of rows in sub-chunk a (BS = 16)
against the columns before it is a tl.dot with both factors relative to r, the last row of sub-chunk a - 1
(exp(sum over (r, i]) and exp(sum over (j, r])); a diagonal block takes its exponent per pair, one column at a time.
The readable reference is autograd of `intra_chunk` (torch_chunk.py); the test compares the whole backward with
autograd of the fp64 recurrence (tests/kernels/test_kda_triton_backward.py).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from dayone.kernels.kda.chunk import decay, diagonal_walk_start, dot, span_step


@triton.jit
def kda_chunk_intra_backward_kernel(
    q, k, g, dAqk, dAkk, dq, dk, dg,
    H,
    K: tl.constexpr, BT: tl.constexpr, BK: tl.constexpr, IEEE: tl.constexpr,
):  # fmt: skip
    """q, k, g, dq, dk, dg: [C, H, BT, K] fp32 (chunk layout, zero rows past a sequence's end); dAqk, dAkk:
    [C, H, BT, BT] fp32, read on and below (dAqk) or below (dAkk) the diagonal only. Every product sums over tokens,
    none over channels, so each program takes a block of BK channels (the last may hang over K)."""
    BS: tl.constexpr = 16
    NS: tl.constexpr = BT // BS
    i_c = tl.program_id(0)
    i_h = tl.program_id(1)
    i_k = tl.program_id(2)
    base = (i_c * H + i_h).to(tl.int64) * BT
    rows = tl.arange(0, BT)
    ck = i_k * BK + tl.arange(0, BK)
    in_k = ck < K
    off_k = (base + rows[:, None]) * K + ck[None, :]
    m_k = in_k[None, :] & (rows >= 0)[:, None]
    b_q = tl.load(q + off_k, mask=m_k, other=0.0)
    b_k = tl.load(k + off_k, mask=m_k, other=0.0)
    b_g = tl.load(g + off_k, mask=m_k, other=0.0)
    # g of the next row (0 past the chunk): sums over (j, r] are suffix sums of it from r - 1 back to j
    b_gn = tl.load(g + off_k + K, mask=(rows + 1 < BT)[:, None] & in_k[None, :], other=0.0)
    off_a = (base + rows[:, None]) * BT + rows[None, :]
    b_P = tl.where(rows[:, None] >= rows[None, :], tl.load(dAqk + off_a), 0.0)
    b_Q = tl.where(rows[:, None] > rows[None, :], tl.load(dAkk + off_a), 0.0)

    # Off-diagonal blocks: rows of sub-chunk a against the columns before it.
    sub = rows // BS
    b_dq = tl.zeros([BT, BK], dtype=tl.float32)
    b_dk = tl.zeros([BT, BK], dtype=tl.float32)
    b_dg = tl.zeros([BT, BK], dtype=tl.float32)
    for a in tl.static_range(1, NS):
        left = tl.where((sub == a)[:, None], decay(tl.cumsum(tl.where((rows > a * BS - 1)[:, None], b_g, 0.0), 0)), 0.0)
        right = tl.cumsum(tl.where((rows < a * BS - 1)[:, None], b_gn, 0.0), 0, reverse=True)
        right = tl.where((sub < a)[:, None], decay(right), 0.0)
        block = (sub == a)[:, None] & (sub < a)[None, :]
        b_Pa = tl.where(block, b_P, 0.0)
        b_Qa = tl.where(block, b_Q, 0.0)
        b_kr = b_k * right
        dq_a = left * dot(b_Pa, b_kr, IEEE)
        dk_row = left * dot(b_Qa, b_kr, IEEE)
        dk_col = right * (dot(tl.trans(b_Pa), b_q * left, IEEE) + dot(tl.trans(b_Qa), b_k * left, IEEE))
        b_dq += dq_a
        b_dk += dk_row + dk_col
        # g_t is in the left factor of rows i >= t of sub-chunk a, in the right factor of columns j < t (t <= r)
        x = b_q * dq_a + b_k * dk_row
        y = b_k * dk_col
        b_dg += tl.where((sub == a)[:, None], tl.cumsum(x, 0, reverse=True), 0.0)
        b_dg += tl.where((rows < a * BS)[:, None], tl.cumsum(y, 0) - y, 0.0)

    # Diagonal blocks, all sub-chunks at once, one column jj of each at a time from the last (chunk.py's walk):
    # span[i] = sum of g over (jj, i] grows by g_{jj+1} as jj steps back.
    q3, k3, g3, ii, at_col, span = diagonal_walk_start(b_q, b_k, b_g, NS, BS, BK, BT)
    P3 = tl.reshape(b_P, [NS, BS, BT])
    Q3 = tl.reshape(b_Q, [NS, BS, BT])
    dq3 = tl.zeros([NS, BS, BK], dtype=tl.float32)
    dk3 = tl.zeros([NS, BS, BK], dtype=tl.float32)
    dg3 = tl.zeros([NS, BS, BK], dtype=tl.float32)
    for d in range(BS):
        jj = BS - 1 - d
        span = span_step(span, g3, ii, jj)
        ed = tl.where(ii >= jj, decay(span), 0.0)
        k_j = tl.sum(tl.where(ii == jj, k3, 0.0), 1)[:, None, :]
        p_j = tl.sum(tl.where(at_col == jj, P3, 0.0), 2)[:, :, None]  # P[i, jj]
        q_j = tl.sum(tl.where(at_col == jj, Q3, 0.0), 2)[:, :, None]
        z = (p_j * q3 + q_j * k3) * ed  # d A[i, jj] / d k_jj, and times k_jj the gradient of span[i]
        dq3 += p_j * ed * k_j
        dk3 += q_j * ed * k_j + tl.where(ii == jj, tl.sum(z, 1)[:, None, :], 0.0)
        # span[i] sums g over (jj, i]: g_t gets the gradients of the rows i >= t, for t > jj
        dg3 += tl.where(ii > jj, tl.cumsum(z * k_j, 1, reverse=True), 0.0)
    b_dq += tl.reshape(dq3, [BT, BK])
    b_dk += tl.reshape(dk3, [BT, BK])
    b_dg += tl.reshape(dg3, [BT, BK])
    tl.store(dq + off_k, b_dq, mask=m_k)
    tl.store(dk + off_k, b_dk, mask=m_k)
    tl.store(dg + off_k, b_dg, mask=m_k)


# Channels per program. At K = 128 (ptxas -v, Triton 3.9, 255 registers each) a whole head at 8 warps spilled 12 KB
# (sm_90) and 15 KB (sm_100) a thread, 32 channels 1.4 KB / 0.85 KB, 16 channels 224 B / 40 B: the [64, 64] gradient
# tiles of A and their per-sub-chunk copies are live throughout, so the channel tiles must stay small.
BLOCK_K = 16
NUM_WARPS = 8
WY_BLOCK = 32  # channels of k exp(G) and v per step of the WY backward (its [64, 64] tiles stay live throughout)


def intra_chunk_backward_triton(q, k, g, dAqk, dAkk, ieee):
    """q, k, g: [C, H, BT, K]; dAqk, dAkk: [C, H, BT, BT] (dAkk of the matrix before beta). Returns dq, dk, dg."""
    C, H, BT, K = q.shape
    q, k, g, dAqk, dAkk = (x.float().contiguous() for x in (q, k, g, dAqk, dAkk))
    dq, dk, dg = (torch.empty_like(q) for _ in range(3))
    if C:
        kda_chunk_intra_backward_kernel[(C, H, triton.cdiv(K, BLOCK_K))](
            q, k, g, dAqk, dAkk, dq, dk, dg, H, K=K, BT=BT, BK=BLOCK_K, IEEE=ieee, num_warps=NUM_WARPS, num_stages=1,
            enable_fp_fusion=True,
        )  # fmt: skip
    return dq, dk, dg


@triton.jit
def wy_part_backward(x, d, dx, b_Mt, b_beta, b_dM, b_dbeta, base, rows, cb,
                     W: tl.constexpr, BK: tl.constexpr, IEEE: tl.constexpr):  # fmt: skip
    """One part X of R = diag(beta) [keg | v] (keg of width K or v of width V), in column blocks of BK, with d its
    output's gradient (dw or du): stores dx = diag(beta) M^T d, returns dM + d R_X^T and dbeta + rowsum(M^T d * X)."""
    for i in range(tl.cdiv(W, BK)):
        c = i * BK + cb
        m = (c < W)[None, :] & (rows >= 0)[:, None]
        off = (base + rows[:, None]) * W + c[None, :]
        b_x = tl.load(x + off, mask=m, other=0.0)
        b_d = tl.load(d + off, mask=m, other=0.0)
        b_dM += dot(b_d, tl.trans(b_x * b_beta[:, None]), IEEE)
        b_dR = dot(b_Mt, b_d, IEEE)
        b_dbeta += tl.sum(b_dR * b_x, 1)
        tl.store(dx + off, b_dR * b_beta[:, None], mask=m)
    return b_dM, b_dbeta


@triton.jit
def kda_chunk_wy_backward_kernel(
    M, Ak, beta, keg, v, dw, du, dAk, dbeta, dkeg, dv,
    H,
    K: tl.constexpr, V: tl.constexpr, BT: tl.constexpr, BK: tl.constexpr, IEEE: tl.constexpr,
):  # fmt: skip
    """Backward of the WY form [w | u] = M diag(beta) [k exp(G) | v], M = (I + diag(beta) A~)^-1, one program per
    (chunk, head), the K and V channels in blocks of BK.

    M, Ak (A~, before beta): [C, H, BT, BT]; beta: [C, H, BT]; keg (k exp(G)), dw: [C, H, BT, K]; v, du: [C, H, BT, V].
    Outputs: dAk [C, H, BT, BT] (strictly lower), dbeta [C, H, BT], dkeg [C, H, BT, K], dv [C, H, BT, V]. With
    R = diag(beta) [keg | v]: dR = M^T [dw | du], dM = [dw | du] R^T, d(I + diag(beta) A~) = -M^T dM M^T."""
    i_c = tl.program_id(0)
    i_h = tl.program_id(1)
    base = (i_c * H + i_h).to(tl.int64) * BT
    rows = tl.arange(0, BT)
    cb = tl.arange(0, BK)
    off_a = (base + rows[:, None]) * BT + rows[None, :]
    b_M = tl.load(M + off_a)
    b_Mt = tl.trans(b_M)
    b_beta = tl.load(beta + base + rows)
    b_dM = tl.zeros([BT, BT], dtype=tl.float32)
    b_dbeta = tl.zeros([BT], dtype=tl.float32)
    b_dM, b_dbeta = wy_part_backward(keg, dw, dkeg, b_Mt, b_beta, b_dM, b_dbeta, base, rows, cb, K, BK, IEEE)
    b_dM, b_dbeta = wy_part_backward(v, du, dv, b_Mt, b_beta, b_dM, b_dbeta, base, rows, cb, V, BK, IEEE)
    b_dA = -dot(dot(b_Mt, b_dM, IEEE), b_Mt, IEEE)
    b_dA = tl.where(rows[:, None] > rows[None, :], b_dA, 0.0)
    b_dbeta += tl.sum(b_dA * tl.load(Ak + off_a), 1)
    tl.store(dAk + off_a, b_dA * b_beta[:, None])
    tl.store(dbeta + base + rows, b_dbeta)


def wy_backward_triton(M, Ak, beta, keg, v, dw, du, ieee):
    """Shapes as in kda_chunk_wy_backward_kernel; returns dAk, dbeta, dkeg, dv (fp32)."""
    C, H, BT, K = keg.shape
    V = v.shape[-1]
    M, Ak, beta, keg, v, dw, du = (x.float().contiguous() for x in (M, Ak, beta, keg, v, dw, du))
    dAk, dbeta, dkeg, dv = (torch.empty_like(x) for x in (Ak, beta, keg, v))
    if C:
        kda_chunk_wy_backward_kernel[(C, H)](
            M, Ak, beta, keg, v, dw, du, dAk, dbeta, dkeg, dv, H, K=K, V=V, BT=BT, BK=WY_BLOCK, IEEE=ieee,
            num_warps=4, num_stages=1, enable_fp_fusion=True,
        )  # fmt: skip
    return dAk, dbeta, dkeg, dv
