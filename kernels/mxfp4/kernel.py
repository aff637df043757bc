"""Triton kernels for MXFP4: dequantization to a float dtype, and a decode-shaped y = x @ W^T on the packed bytes.

Both decode values by building fp32 bit patterns instead of calling exp2 or a lookup table: every E2M1 value and
every E8M0 scale (2^-127 included, a subnormal) is a single exact bit pattern, so the kernels match the reference
bit for bit and no fast-math exp2 can flush the subnormal scale to zero.
"""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def e2m1_to_fp32(codes):
    """int32 codes 0..15 -> fp32. Index i = bits 0-2: i = 2e + m gives 0.5 * m when e == 0, else 2^(e-1) * (1 + m/2)."""
    index = codes & 7
    e = index >> 1
    m = index & 1
    bits = tl.where(e == 0, m * (126 << 23), ((e + 126) << 23) | (m << 22))
    bits = bits | ((codes & 8) << 28)  # sign bit 3 -> fp32 bit 31; code 8 becomes -0.0
    return bits.to(tl.float32, bitcast=True)


@triton.jit
def e8m0_to_fp32(s):
    """int32 scale bytes 0..255 -> 2^(s-127) in fp32; byte 0 is the subnormal 2^-127, byte 255 is NaN (OCP MX)."""
    bits = tl.where(s == 0, 0x00400000, s << 23)
    bits = tl.where(s == 255, 0x7FC00000, bits)
    return bits.to(tl.float32, bitcast=True)


@triton.jit
def exact_cast(v, dtype: tl.constexpr):
    """Cast dequantized fp32 values to `dtype`. To bf16 it drops the low 16 bits, exact because a dequantized value
    has two significant bits; that also sidesteps the interpreter's fp32->bf16 cast, which mangles subnormals."""
    if dtype == tl.bfloat16:
        return (v.to(tl.int32, bitcast=True) >> 16).to(tl.int16).to(tl.bfloat16, bitcast=True)
    else:
        return v.to(dtype)


@triton.jit
def dequant_tile(packed_ptr, scale_ptr, rows64, cols, mask, stride_packed, stride_scale):
    """fp32 weights of the packed columns `cols` (packed column j holds columns 2j and 2j+1) of the rows `rows64`
    ([R, 1] int64): (columns 2j, columns 2j+1), each [R, len(cols)]; zero where `mask` is off."""
    byte = tl.load(packed_ptr + rows64 * stride_packed + cols[None, :], mask=mask, other=0).to(tl.int32)
    # columns 2j and 2j+1 share the group (2j) // 32 = j // 16
    s = tl.load(scale_ptr + rows64 * stride_scale + cols[None, :] // 16, mask=mask, other=0).to(tl.int32)
    scale = e8m0_to_fp32(s)
    return e2m1_to_fp32(byte & 15) * scale, e2m1_to_fp32(byte >> 4) * scale


@triton.jit
def mxfp4_dequant_kernel(
    packed_ptr, scale_ptr, out_ptr,  # [N, K/2] uint8, [N, K/32] uint8, [N, K]
    N, K_PACKED, stride_packed, stride_scale, stride_out,  # K_PACKED = K / 2
    BLOCK_N: tl.constexpr, BLOCK_KP: tl.constexpr,  # BLOCK_KP packed bytes per tile: 2 * BLOCK_KP columns
):  # fmt: skip
    rows = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    cols = tl.program_id(1) * BLOCK_KP + tl.arange(0, BLOCK_KP)
    mask = (rows[:, None] < N) & (cols[None, :] < K_PACKED)
    rows64 = rows.to(tl.int64)[:, None]
    low, high = dequant_tile(packed_ptr, scale_ptr, rows64, cols, mask, stride_packed, stride_scale)
    out_row = out_ptr + rows64 * stride_out
    tl.store(out_row + 2 * cols[None, :], exact_cast(low, out_ptr.dtype.element_ty), mask=mask)
    tl.store(out_row + 2 * cols[None, :] + 1, exact_cast(high, out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def mxfp4_linear_kernel(
    x_ptr, packed_ptr, scale_ptr, out_ptr,  # [M, K], [N, K/2] uint8, [N, K/32] uint8, [M, N]
    M, N, K_PACKED, stride_x, stride_packed, stride_scale, stride_out,  # K_PACKED = K / 2
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_KP: tl.constexpr,
    DOT_FP32: tl.constexpr,  # fp32 tiles into tl.dot: the interpreter (bf16 dots are wrong there) and fp32 inputs
):  # fmt: skip
    """out[m, n] = sum_k x[m, k] * W[n, k], fp32 accumulation. Each packed byte is read once per M-block.

    Rather than interleave the two nibbles of a byte into adjacent columns, x is split into its even and odd
    columns: y = x_even @ W_low^T + x_odd @ W_high^T.
    """
    rows_m = tl.program_id(1) * BLOCK_M + tl.arange(0, BLOCK_M)
    rows_n = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask_m = rows_m < M
    mask_n = rows_n < N
    x_rows = x_ptr + rows_m.to(tl.int64)[:, None] * stride_x
    w_rows = rows_n.to(tl.int64)[:, None]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for start in range(0, K_PACKED, BLOCK_KP):
        cols = start + tl.arange(0, BLOCK_KP)
        mask_k = cols < K_PACKED
        mask_x = mask_m[:, None] & mask_k[None, :]
        mask_w = mask_n[:, None] & mask_k[None, :]
        x_even = tl.load(x_rows + 2 * cols[None, :], mask=mask_x, other=0.0)
        x_odd = tl.load(x_rows + 2 * cols[None, :] + 1, mask=mask_x, other=0.0)
        w_low, w_high = dequant_tile(packed_ptr, scale_ptr, w_rows, cols, mask_w, stride_packed, stride_scale)
        if DOT_FP32:
            acc += tl.dot(x_even.to(tl.float32), tl.trans(w_low), input_precision="ieee")
            acc += tl.dot(x_odd.to(tl.float32), tl.trans(w_high), input_precision="ieee")
        else:
            # exact: a dequantized weight has two significant bits, so it fits any 16-bit float
            acc += tl.dot(x_even, tl.trans(w_low.to(x_ptr.dtype.element_ty)))
            acc += tl.dot(x_odd, tl.trans(w_high.to(x_ptr.dtype.element_ty)))
    out = out_ptr + rows_m.to(tl.int64)[:, None] * stride_out + rows_n[None, :]
    tl.store(out, acc.to(out_ptr.dtype.element_ty), mask=mask_m[:, None] & mask_n[None, :])


def launch_dequant(packed, scale, out, block_n: int = 32, block_kp: int = 64) -> None:
    """Dequantize packed [N, K/2] + scale [N, K/32] into out [N, K] (any float dtype)."""
    n, k_packed = packed.shape
    grid = (triton.cdiv(n, block_n), triton.cdiv(k_packed, block_kp))
    mxfp4_dequant_kernel[grid](
        packed, scale, out, n, k_packed, packed.stride(0), scale.stride(0), out.stride(0),
        BLOCK_N=block_n, BLOCK_KP=block_kp, enable_fp_fusion=True,
    )  # fmt: skip


def launch_linear(x, packed, scale, out, dot_fp32: bool, block_n: int = 32, block_kp: int = 64) -> None:
    """out [M, N] = x [M, K] @ dequant(packed [N, K/2], scale [N, K/32])^T."""
    m = x.shape[0]
    n, k_packed = packed.shape
    block_m = 16  # tl.dot's smallest tile; decode batches are 1..16 tokens
    grid = (triton.cdiv(n, block_n), triton.cdiv(m, block_m))
    mxfp4_linear_kernel[grid](
        x, packed, scale, out, m, n, k_packed, x.stride(0), packed.stride(0), scale.stride(0), out.stride(0),
        BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_KP=block_kp, DOT_FP32=dot_fp32,
        enable_fp_fusion=True,
    )  # fmt: skip
