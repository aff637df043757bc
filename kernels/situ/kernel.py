"""Triton kernel: gated activation (SiTU or SiLU) times up, fp32 math, one row tile per program."""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def tanh_fp32(x):
    """tanh without libdevice (the interpreter has none): an odd Taylor series near 0, where (1 - t) / (1 + t)
    would cancel, and the exp form elsewhere. Near 0.25 the next Taylor term is below 1e-8 relative."""
    a = tl.abs(x)
    t = tl.exp(-2.0 * a)
    far = (1.0 - t) / (1.0 + t)
    a2 = a * a
    near = a * (1.0 + a2 * (-1.0 / 3.0 + a2 * (2.0 / 15.0 + a2 * (-17.0 / 315.0 + a2 * (62.0 / 2835.0)))))
    y = tl.where(a < 0.25, near, far)
    return tl.where(x < 0, -y, y)


@triton.jit
def act_and_mul_kernel(
    gate_ptr,  # [T, I], row stride stride_gate
    up_ptr,  # [T, I], row stride stride_up
    out_ptr,  # [T, I] contiguous
    I,
    stride_gate,
    stride_up,
    beta,
    linear_beta,
    SITU: tl.constexpr,  # True: SiTU (Kimi K3); False: SiLU (Kimi Linear)
    BLOCK: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < I
    g = tl.load(gate_ptr + row * stride_gate + cols, mask=mask, other=0.0).to(tl.float32)
    u = tl.load(up_ptr + row * stride_up + cols, mask=mask, other=0.0).to(tl.float32)
    if SITU:
        out = beta * tanh_fp32(g / beta) * tl.sigmoid(g) * (linear_beta * tanh_fp32(u / linear_beta))
    else:
        out = g * tl.sigmoid(g) * u
    tl.store(out_ptr + row * I + cols, out.to(out_ptr.dtype.element_ty), mask=mask)


def launch(gate, up, out, situ: bool, beta: float, linear_beta: float, block: int = 1024) -> None:
    """gate, up [T, I] (unit column stride), out [T, I] contiguous."""
    t, i = gate.shape
    block = min(block, triton.next_power_of_2(i))
    grid = (t, triton.cdiv(i, block))
    act_and_mul_kernel[grid](
        gate, up, out, i, gate.stride(0), up.stride(0), beta, linear_beta, SITU=situ, BLOCK=block, enable_fp_fusion=True
    )  # fmt: skip
