"""Causal depthwise short convolution + SiLU in Triton: packed prefill, its final conv state, and the decode update.

The conv state of a sequence is its last W - 1 inputs, oldest first, [D, W - 1]; a decode step shifts one in.
Math in fp32; inputs and states keep their dtype (the state is raw inputs, so storing it is lossless).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def _window_value(x, h0, seq, bos, src, d, m, D, W: tl.constexpr, HAS_INITIAL: tl.constexpr):
    """Input `src` (an absolute token index, maybe before `bos`) of channel block d, from x or the initial state."""
    inside = src >= bos
    val = tl.load(x + src.to(tl.int64)[:, None] * D + d[None, :], mask=(m & inside)[:, None] & (d < D)[None, :])
    val = tl.where(inside[:, None], val.to(tl.float32), 0.0)
    if HAS_INITIAL:
        back = W - 1 + src - bos  # position in the initial state when the token precedes the sequence
        m_s = (m & ~inside & (back >= 0))[:, None] & (d < D)[None, :]
        off = (seq.to(tl.int64)[:, None] * D + d[None, :]) * (W - 1) + back[:, None]
        val += tl.load(h0 + off, mask=m_s, other=0.0).to(tl.float32)
    return val


@triton.jit
def short_conv_fwd_kernel(
    x, weight, y, h0, seq_idx, cu_seqlens, T_total, D,
    W: tl.constexpr, BT: tl.constexpr, BD: tl.constexpr, HAS_INITIAL: tl.constexpr,
):  # fmt: skip
    t = tl.program_id(0) * BT + tl.arange(0, BT)
    d = tl.program_id(1) * BD + tl.arange(0, BD)
    m = t < T_total
    seq = tl.load(seq_idx + t, mask=m, other=0)
    bos = tl.load(cu_seqlens + seq, mask=m, other=0)
    acc = tl.zeros([BT, BD], dtype=tl.float32)
    for w in tl.static_range(W):
        val = _window_value(x, h0, seq, bos, t - (W - 1) + w, d, m, D, W, HAS_INITIAL)
        acc += val * tl.load(weight + d * W + w, mask=d < D, other=0.0).to(tl.float32)[None, :]
    out = acc * tl.sigmoid(acc)
    tl.store(
        y + t.to(tl.int64)[:, None] * D + d[None, :], out.to(y.dtype.element_ty), mask=m[:, None] & (d < D)[None, :]
    )


@triton.jit
def short_conv_final_state_kernel(
    x, h0, ht, cu_seqlens, D, W: tl.constexpr, BD: tl.constexpr, HAS_INITIAL: tl.constexpr
):  # fmt: skip
    n = tl.program_id(0)
    d = tl.program_id(1) * BD + tl.arange(0, BD)
    bos = tl.load(cu_seqlens + n)
    eos = tl.load(cu_seqlens + n + 1)
    for i in tl.static_range(W - 1):
        src = eos - (W - 1) + i + tl.zeros([1], dtype=tl.int32)
        seq = n + tl.zeros([1], dtype=tl.int32)
        val = _window_value(x, h0, seq, bos, src, d, src < eos, D, W, HAS_INITIAL)
        tl.store(
            ht + (n.to(tl.int64) * D + d[None, :]) * (W - 1) + i, val.to(ht.dtype.element_ty), mask=(d < D)[None, :]
        )


@triton.jit
def short_conv_update_kernel(
    x, weight, y, pool, slots, inter, T, D,
    W: tl.constexpr, WP: tl.constexpr, BD: tl.constexpr, VERIFY: tl.constexpr,
):  # fmt: skip
    """Program (request n, channel block): T tokens x [N, T, D] from the conv state pool[slots[n]] [D, W - 1].

    Token t's window is W inputs, oldest first: x[n, t - (W - 1) + p] for p < W, reaching back into the state.
    Its last W - 1 entries are the state after token t: VERIFY writes them to inter [N, T, D, W - 1] and leaves the
    pool alone; decode writes the last token's into the pool after every read of it.
    """
    n = tl.program_id(0)
    d = tl.program_id(1) * BD + tl.arange(0, BD)
    md = d < D
    slot = tl.load(slots + n).to(tl.int64)
    if slot >= 0:
        p = tl.arange(0, WP)  # window position; WP is W rounded up to a power of two
        mw = md[:, None] & (p < W)[None, :]
        b_w = tl.load(weight + d[:, None] * W + p[None, :], mask=mw, other=0.0).to(tl.float32)
        base = (slot * D + d[:, None]) * (W - 1)
        row = n.to(tl.int64) * T
        keep = mw & (p >= 1)[None, :]  # the window entries that form the next state, at position p - 1
        window = tl.zeros([BD, WP], dtype=tl.float32)
        for t in range(T):
            src = t - (W - 1) + p  # >= 0: a token of this step; < 0: state position W - 1 + src
            from_x = (src >= 0)[None, :]
            b_x = tl.load(x + (row + src[None, :]) * D + d[:, None], mask=mw & from_x, other=0.0)
            b_s = tl.load(pool + base + (W - 1) + src[None, :], mask=mw & ~from_x, other=0.0)
            window = b_x.to(tl.float32) + b_s.to(tl.float32)
            acc = tl.sum(window * b_w, 1)
            tl.store(y + (row + t) * D + d, (acc * tl.sigmoid(acc)).to(y.dtype.element_ty), mask=md)
            if VERIFY:
                off = ((row + t) * D + d[:, None]) * (W - 1) + p[None, :] - 1
                tl.store(inter + off, window.to(inter.dtype.element_ty), mask=keep)
        if not VERIFY:
            tl.store(pool + base + p[None, :] - 1, window.to(pool.dtype.element_ty), mask=keep)


BT, BD = 16, 64


def short_conv_triton(x, weight, cu_seqlens, initial_state, output_final_state):
    """Arguments and results as in `dayone.kernels.short_conv.short_conv`."""
    B, T, D = x.shape
    weight = weight.reshape(D, -1).contiguous()
    W = weight.shape[1]
    dev = x.device
    cu = torch.arange(0, B * T + 1, T, device=dev) if cu_seqlens is None else cu_seqlens.to(dev)
    cu = cu.to(torch.int32)
    lengths = (cu[1:] - cu[:-1]).long()
    seq_idx = torch.repeat_interleave(torch.arange(len(lengths), device=dev, dtype=torch.int32), lengths)
    x = x.contiguous()
    y = torch.empty_like(x)
    ht = x.new_empty(len(lengths), D, W - 1)
    h0 = ht if initial_state is None else initial_state.contiguous()
    has_initial = initial_state is not None
    if B * T:
        grid = (triton.cdiv(B * T, BT), triton.cdiv(D, BD))
        short_conv_fwd_kernel[grid](
            x, weight, y, h0, seq_idx, cu, B * T, D, W=W, BT=BT, BD=BD, HAS_INITIAL=has_initial, enable_fp_fusion=True
        )  # fmt: skip
    if output_final_state:
        grid = (len(lengths), triton.cdiv(D, BD))
        short_conv_final_state_kernel[grid](
            x, h0, ht, cu, D, W=W, BD=BD, HAS_INITIAL=has_initial, enable_fp_fusion=True
        )  # fmt: skip
    return y, (ht if output_final_state else None)


def short_conv_update_triton(x, weight, conv_state_pool, slots, intermediate_states):
    """Arguments and results as in `dayone.kernels.short_conv.short_conv_update`."""
    squeeze = x.dim() == 2
    xs = (x[:, None] if squeeze else x).contiguous()
    N, T, D = xs.shape
    weight = weight.reshape(D, -1).contiguous()
    W = weight.shape[1]
    if not conv_state_pool.is_contiguous():
        raise ValueError("conv_state_pool must be contiguous [P, D, W - 1] (it is updated in place)")
    verify = intermediate_states is not None
    if verify and not intermediate_states.is_contiguous():
        raise ValueError("intermediate_states must be contiguous [N, T, D, W - 1]")
    y = torch.zeros_like(xs)  # padding requests read as zeros
    grid = (N, triton.cdiv(D, BD))
    short_conv_update_kernel[grid](
        xs, weight, y, conv_state_pool, slots.to(torch.int32).contiguous(),
        intermediate_states if verify else conv_state_pool, T, D,
        W=W, WP=triton.next_power_of_2(W), BD=BD, VERIFY=verify, enable_fp_fusion=True,
    )  # fmt: skip
    return y[:, 0] if squeeze else y
