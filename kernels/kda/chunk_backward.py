"""Chunked KDA backward in Triton: the recurrence over chunks, both ways, and the gradients that go through the states.

The readable reference for every formula here is torch_chunk_autograd.py (the same chunked forward, differentiated by
autograd); fla's chunk_kda backward (fla/ops/kda, fla/ops/common/chunk_delta_h.py) is the numerics peer and has the
same split: recompute the states per chunk, walk the chunks backwards for the state gradient, and leave the
chunk-local WY / UT-transform to a chunk-parallel step (chunk_backward_intra.py, wired by kernels/kda/autograd.py).

Per chunk c of BT = 64 tokens and head, with the chunk's WY intermediates (torch_chunk.py's names, fp32, chunk layout
[C, H, BT, *] with zero rows past a sequence's end) qg = q exp(G), kg = k exp(G_last - G), w, u, A_qk and
gl = exp(G_last), and S_c the state entering the chunk:
    forward   v'_c = u - w S_c;  o_c = qg S_c + A_qk v'_c;  S_{c+1} = diag(gl) S_c + kg^T v'_c
    backward  (dS = d loss / d S_{c+1}, dS_N = d loss / d final state)
              dv' = A_qk^T do + kg dS           -> du (= dv')
              dqg = do S_c^T;  dA_qk = do v'^T;  dkg = v' dS^T;  dgl = rowsum(S_c * dS);  dw = -dv' S_c^T
              dS  <- qg^T do + diag(gl) dS - w^T dv'   (d loss / d S_c; at the first chunk, the initial state's)
Two kernels, one program per (V block, sequence, head), each walking its sequence's chunks: `kda_chunk_states_kernel`
stores S_c of every chunk (a separate launch, so that the backward walk reads them from memory written before it
started), then `kda_chunk_backward_kernel` walks back. Every V column of the state is independent, so the V blocks
are too; the gradients that sum over V (dqg, dA_qk, dkg, dgl, dw) are written per V block and summed by the caller.
Head dims need not be powers of two: K and V tiles are padded as in chunk.py (tile_width), loaded as zeros and never
stored. The dots run in IEEE fp32 when IEEE is set (fp32 inputs, judged against the fp32 reference), TF32 otherwise,
as chunk.py's; the interpreter computes every dot in fp32.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from dayone.kernels.kda.chunk import dot, tile_width


@triton.jit
def state_program(chunk_offsets, K: tl.constexpr, V: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr):
    """Where a program of either kernel (grid: V blocks, sequences, heads) walks: its V block, sequence and head,
    the sequence's chunks c0 .. c1 - 1, the K and V columns of its state tile and which of them are inside K and V."""
    i_v = tl.program_id(0)
    i_n = tl.program_id(1)
    i_h = tl.program_id(2)
    c0 = tl.load(chunk_offsets + i_n)
    c1 = tl.load(chunk_offsets + i_n + 1)
    ck = tl.arange(0, BK)
    cv = i_v * BV + tl.arange(0, BV)
    return i_v, i_n, i_h, c0, c1, ck, cv, ck < K, cv < V


@triton.jit
def kda_chunk_states_kernel(
    w, u, kg, gl, h0, h, chunk_offsets,
    H,
    K: tl.constexpr, V: tl.constexpr, BT: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr,
    HAS_INITIAL: tl.constexpr, IEEE: tl.constexpr,
):  # fmt: skip
    """w, kg: [C, H, BT, K]; u: [C, H, BT, V]; gl: [C, H, K]; h0: [N, H, K, V]; h (out): [C, H, K, V], the state
    entering each chunk. chunk_offsets: [N + 1], the first chunk of each sequence."""
    _, i_n, i_h, c0, c1, ck, cv, in_k, in_v = state_program(chunk_offsets, K, V, BK, BV)
    rows = tl.arange(0, BT)
    m_s = in_k[:, None] & in_v[None, :]
    b_S = tl.zeros([BK, BV], dtype=tl.float32)
    if HAS_INITIAL:
        b_S = tl.load(h0 + ((i_n * H + i_h) * K + ck[:, None]).to(tl.int64) * V + cv[None, :], mask=m_s, other=0.0)
    for c in range(c0, c1):
        head = (c * H + i_h).to(tl.int64)
        tl.store(h + (head * K + ck[:, None]) * V + cv[None, :], b_S, mask=m_s)
        off_k = (head * BT + rows[:, None]) * K + ck[None, :]
        b_w = tl.load(w + off_k, mask=in_k[None, :], other=0.0)
        b_kg = tl.load(kg + off_k, mask=in_k[None, :], other=0.0)
        b_u = tl.load(u + (head * BT + rows[:, None]) * V + cv[None, :], mask=in_v[None, :], other=0.0)
        b_gl = tl.load(gl + head * K + ck, mask=in_k, other=0.0)
        b_vn = b_u - dot(b_w, b_S, IEEE)
        b_S = b_S * b_gl[:, None] + dot(tl.trans(b_kg), b_vn, IEEE)


@triton.jit
def kda_chunk_backward_kernel(
    qg, kg, w, u, Aqk, gl, h, do, dht, dh0,
    dqg, dkg, dw, du, dAqk, dgl, chunk_offsets,
    H, C,
    K: tl.constexpr, V: tl.constexpr, BT: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr,
    HAS_FINAL_GRAD: tl.constexpr, IEEE: tl.constexpr,
):  # fmt: skip
    """Inputs as kda_chunk_states_kernel's plus qg [C, H, BT, K], Aqk [C, H, BT, BT], h (its output), do [C, H, BT, V],
    dht [N, H, K, V]. Outputs: du [C, H, BT, V] and dh0 [N, H, K, V] whole; dqg, dkg, dw [NV, C, H, BT, K],
    dAqk [NV, C, H, BT, BT] and dgl [NV, C, H, K] per V block (NV = cdiv(V, BV)), to be summed over the first dim."""
    i_v, i_n, i_h, c0, c1, ck, cv, in_k, in_v = state_program(chunk_offsets, K, V, BK, BV)
    rows = tl.arange(0, BT)
    m_s = in_k[:, None] & in_v[None, :]
    off_s = ((i_n * H + i_h) * K + ck[:, None]).to(tl.int64) * V + cv[None, :]
    b_dS = tl.zeros([BK, BV], dtype=tl.float32)
    if HAS_FINAL_GRAD:
        b_dS = tl.load(dht + off_s, mask=m_s, other=0.0)
    part = (i_v * C).to(tl.int64)  # this V block's slice of the per-block outputs
    for r in range(c1 - c0):
        c = c1 - 1 - r
        head = (c * H + i_h).to(tl.int64)
        off_k = (head * BT + rows[:, None]) * K + ck[None, :]
        off_v = (head * BT + rows[:, None]) * V + cv[None, :]
        off_a = (head * BT + rows[:, None]) * BT + rows[None, :]
        off_kp = part * H * BT * K + off_k
        # In an order that keeps few [BT, K] tiles live (each is 64 registers a thread at K = 128): every product is
        # stored as soon as it is known, and w is loaded again for the last one rather than kept.
        b_S = tl.load(h + (head * K + ck[:, None]) * V + cv[None, :], mask=m_s, other=0.0)
        b_do = tl.load(do + off_v, mask=in_v[None, :], other=0.0)
        tl.store(dqg + off_kp, dot(b_do, tl.trans(b_S), IEEE), mask=in_k[None, :])
        tl.store(dgl + part * H * K + head * K + ck, tl.sum(b_S * b_dS, 1), mask=in_k)
        b_vn = tl.load(u + off_v, mask=in_v[None, :], other=0.0)
        b_vn -= dot(tl.load(w + off_k, mask=in_k[None, :], other=0.0), b_S, IEEE)
        tl.store(dkg + off_kp, dot(b_vn, tl.trans(b_dS), IEEE), mask=in_k[None, :])
        tl.store(dAqk + part * H * BT * BT + off_a, dot(b_do, tl.trans(b_vn), IEEE))
        b_dvn = dot(tl.trans(tl.load(Aqk + off_a)), b_do, IEEE)
        b_dvn += dot(tl.load(kg + off_k, mask=in_k[None, :], other=0.0), b_dS, IEEE)
        tl.store(du + off_v, b_dvn, mask=in_v[None, :])
        tl.store(dw + off_kp, -dot(b_dvn, tl.trans(b_S), IEEE), mask=in_k[None, :])

        b_gl = tl.load(gl + head * K + ck, mask=in_k, other=0.0)
        b_dS = b_dS * b_gl[:, None] + dot(tl.trans(tl.load(qg + off_k, mask=in_k[None, :], other=0.0)), b_do, IEEE)
        b_dS -= dot(tl.trans(tl.load(w + off_k, mask=in_k[None, :], other=0.0)), b_dvn, IEEE)
    tl.store(dh0 + off_s, b_dS, mask=m_s)


def pick_block_v(V: int) -> int:
    """The V block of both kernels. At K = V = 128 (ptxas -v, Triton 3.9) the backward kernel sits at 255 registers
    and spills 0.7-0.8 KB a thread at BV = 32 and 4 warps, 3.2-3.6 KB at BV = 64 (8 warps spill more); whether
    BV = 16 (0.3-0.5 KB, twice the reloads and partial sums) pays needs a GPU to time."""
    return min(tile_width(V), 32)


def chunk_backward_triton(qg, kg, w, u, Aqk, gl, do, h0, dht, chunk_offsets, ieee):
    """The state walk both ways and the gradients through the states, for WY intermediates in chunk layout.

    qg, kg, w: [C, H, BT, K]; u, do: [C, H, BT, V]; Aqk: [C, H, BT, BT]; gl: [C, H, K] (all fp32, contiguous, zero
    rows past a sequence's end); h0, dht: [N, H, K, V] fp32 or None; chunk_offsets: [N + 1] int32 on the device, the
    first chunk of each sequence (the chunks of sequence n are chunk_offsets[n] .. chunk_offsets[n + 1] - 1).
    ieee: IEEE fp32 dots (fp32 inputs) rather than TF32.

    Returns the gradients of qg, kg, w, u, Aqk, gl (their shapes) and of the initial states [N, H, K, V].
    """
    C, H, BT, K = qg.shape
    V = u.shape[-1]
    N = chunk_offsets.shape[0] - 1
    dev = qg.device
    BV = pick_block_v(V)
    NV = triton.cdiv(V, BV)
    f32 = {"dtype": torch.float32, "device": dev}
    h = torch.empty(C, H, K, V, **f32)
    dh0 = torch.empty(N, H, K, V, **f32)
    dqg, dkg, dw = (torch.empty(NV, C, H, BT, K, **f32) for _ in range(3))
    du = torch.empty(C, H, BT, V, **f32)
    dAqk = torch.empty(NV, C, H, BT, BT, **f32)
    dgl = torch.empty(NV, C, H, K, **f32)
    shapes = {"K": K, "V": V, "BT": BT, "BK": tile_width(K), "BV": BV, "IEEE": ieee, "num_warps": 4, "num_stages": 1}
    grid = (NV, N, H)
    kda_chunk_states_kernel[grid](
        w, u, kg, gl, h if h0 is None else h0, h, chunk_offsets, H, HAS_INITIAL=h0 is not None, **shapes,
        enable_fp_fusion=True,
    )  # fmt: skip
    kda_chunk_backward_kernel[grid](
        qg, kg, w, u, Aqk, gl, h, do, dh0 if dht is None else dht, dh0, dqg, dkg, dw, du, dAqk, dgl, chunk_offsets,
        H, C, HAS_FINAL_GRAD=dht is not None, **shapes, enable_fp_fusion=True,
    )  # fmt: skip
    return dqg.sum(0), dkg.sum(0), dw.sum(0), du, dAqk.sum(0), dgl.sum(0), dh0
