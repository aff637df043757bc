"""Recurrent KDA decode in Triton over a state pool, with a verify mode for speculative decoding.

One program per (request, V block, head) keeps its [K, BV] slice of the fp32 state in registers for all T tokens of
the request. Decode (T = 1, or T tokens known to be accepted) writes the state back to its pool slot in place.
Verify (T draft tokens) leaves the pool alone and writes the state after every token to an intermediate buffer, so
the engine keeps the state of the last accepted token (SGLang's scheme for hybrid models), with `commit_accepted`.
A negative slot marks a padding request (CUDA-graph batches): its program does nothing.
Head dims need not be powers of two: the K tile is K rounded up (tile_width), the last V block may hang over V, and
the channels outside the head load as zeros and are never stored.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from dayone.kernels.kda.chunk import GATES, tile_width


@triton.jit
def kda_decode_kernel(
    q, k, v, g, beta, A_log, dt_bias, state_pool, slots, o, inter,
    scale, lower_bound, T, H,
    K: tl.constexpr, V: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr,
    GATE: tl.constexpr, L2NORM: tl.constexpr, BETA_SIGMOID: tl.constexpr, VERIFY: tl.constexpr,
):  # fmt: skip
    i_v = tl.program_id(0)
    i_n = tl.program_id(1)
    i_h = tl.program_id(2)
    slot = tl.load(slots + i_n).to(tl.int64)
    if slot >= 0:
        ck = tl.arange(0, BK)
        cv = i_v * BV + tl.arange(0, BV)
        in_k = ck < K
        in_v = cv < V
        off_s = (ck[:, None] * V + cv[None, :]).to(tl.int64)
        m_s = in_k[:, None] & in_v[None, :]
        pool_s = state_pool + (slot * H + i_h) * K * V + off_s
        b_S = tl.load(pool_s, mask=m_s, other=0.0)
        if GATE != 0:
            b_dt = tl.load(dt_bias + i_h * K + ck, mask=in_k, other=0.0).to(tl.float32)
            a = tl.exp(tl.load(A_log + i_h).to(tl.float32))
        for t in range(T):
            row = (i_n * T + t).to(tl.int64) * H + i_h
            b_q = tl.load(q + row * K + ck, mask=in_k, other=0.0).to(tl.float32)
            b_k = tl.load(k + row * K + ck, mask=in_k, other=0.0).to(tl.float32)
            b_v = tl.load(v + row * V + cv, mask=in_v, other=0.0).to(tl.float32)
            b_g = tl.load(g + row * K + ck, mask=in_k, other=0.0).to(tl.float32)
            b_beta = tl.load(beta + row).to(tl.float32)
            if L2NORM:
                b_q = b_q / tl.sqrt(tl.sum(b_q * b_q) + 1e-6)
                b_k = b_k / tl.sqrt(tl.sum(b_k * b_k) + 1e-6)
            b_q = b_q * scale
            if GATE == 1:
                b_g = b_g + b_dt
                b_g = -a * tl.where(b_g > 20.0, b_g, tl.log(1.0 + tl.exp(b_g)))
            elif GATE == 2:
                b_g = lower_bound * tl.sigmoid(a * (b_g + b_dt))
            if BETA_SIGMOID:
                b_beta = tl.sigmoid(b_beta)
            b_S = b_S * tl.exp(b_g)[:, None]
            b_kS = tl.sum(b_k[:, None] * b_S, 0)
            b_S = b_S + (b_beta * b_k)[:, None] * (b_v - b_kS)[None, :]
            b_o = tl.sum(b_q[:, None] * b_S, 0)
            tl.store(o + row * V + cv, b_o.to(o.dtype.element_ty), mask=in_v)
            if VERIFY:
                tl.store(inter + row * K * V + off_s, b_S, mask=m_s)
        if not VERIFY:
            tl.store(pool_s, b_S, mask=m_s)


def pick_block_v(V: int) -> int:
    """32 columns of a K = 128 fp32 state is 32 registers a thread at 4 warps, and 4x more programs to fill the GPU."""
    return min(tile_width(V), 32)


def kda_decode_triton(
    q, k, v, g, beta, state_pool, slots, A_log, dt_bias, gate, lower_bound, scale, use_qk_l2norm, beta_logits,
    intermediate_states,
):  # fmt: skip
    """Launch the decode kernel; arguments as in `dayone.kernels.kda.kda_decode`."""
    N, T, H, K = q.shape
    V = v.shape[-1]
    if state_pool.dtype != torch.float32 or not state_pool.is_contiguous():
        raise ValueError("state_pool must be a contiguous float32 tensor [P, H, K, V] (it is updated in place)")
    dummy = torch.zeros(1, dtype=torch.float32, device=q.device)
    A_log = dummy if A_log is None else A_log.float().contiguous()
    dt_bias = dummy if dt_bias is None else dt_bias.float().contiguous()
    q, k, v, g, beta = (x.contiguous() for x in (q, k, v, g, beta))
    o = torch.zeros(N, T, H, V, dtype=v.dtype, device=q.device)  # padding requests read as zeros
    verify = intermediate_states is not None
    BV = pick_block_v(V)
    kda_decode_kernel[(triton.cdiv(V, BV), N, H)](
        q, k, v, g, beta, A_log, dt_bias, state_pool, slots.to(torch.int32).contiguous(), o,
        intermediate_states if verify else dummy,
        K**-0.5 if scale is None else scale, lower_bound, T, H,
        K=K, V=V, BK=tile_width(K), BV=BV, GATE=GATES[gate], L2NORM=use_qk_l2norm, BETA_SIGMOID=beta_logits, VERIFY=verify,
        num_warps=4, enable_fp_fusion=True,
    )  # fmt: skip
    return o
