"""The public ops of dayone.kernels.mxfp4: dequantize_mxfp4 and mxfp4_linear; the Triton kernel for CUDA tensors, the
torch counterpart for CPU ones (dayone.kernels.dispatch)."""

from __future__ import annotations

import os

import torch
from dayone.kernels.dispatch import use_triton
from dayone.kernels.mxfp4.reference import (
    GROUP_SIZE,
    dequantize_mxfp4_reference,
    mxfp4_linear_reference,
)


def _check(packed: torch.Tensor, scale: torch.Tensor) -> None:
    if packed.dtype != torch.uint8 or scale.dtype != torch.uint8:
        raise ValueError(f"mxfp4: weight_packed and weight_scale must be uint8, got {packed.dtype}, {scale.dtype}")
    n, k_packed = packed.shape
    if scale.shape != (n, 2 * k_packed // GROUP_SIZE) or (2 * k_packed) % GROUP_SIZE:
        raise ValueError(f"mxfp4: weight_scale {tuple(scale.shape)} does not fit weight_packed {tuple(packed.shape)}")


def dequantize_mxfp4(
    packed: torch.Tensor, scale: torch.Tensor, dtype: torch.dtype = torch.bfloat16, *, backend: str | None = None
) -> torch.Tensor:
    """Dequantize compressed-tensors MXFP4 to a float weight. Exact: every value is representable in bf16.

    Args:
        packed: weight_packed [N, K/2] uint8, low nibble = even column.
        scale: weight_scale [N, K/32] uint8 E8M0 (byte 0 = 2^-127, byte 255 = NaN group).
        dtype: output dtype (bf16 by default; fp32 for reference work).
        backend: None (CUDA -> Triton, CPU -> torch), "triton" or "torch".
    Returns:
        weight [N, K] in `dtype`.
    """
    _check(packed, scale)
    if not use_triton(packed, backend, "mxfp4"):
        return dequantize_mxfp4_reference(packed, scale, dtype)
    from dayone.kernels.mxfp4.kernel import launch_dequant

    out = torch.empty(packed.shape[0], 2 * packed.shape[1], dtype=dtype, device=packed.device)
    launch_dequant(packed.contiguous(), scale.contiguous(), out)
    return out


def mxfp4_linear(
    x: torch.Tensor, packed: torch.Tensor, scale: torch.Tensor, *, backend: str | None = None
) -> torch.Tensor:
    """y = x @ W^T with W read as packed MXFP4 (4.25 bits per weight), fp32 accumulation; for decode (M <= 16).

    Args:
        x: activations [M, K] (bf16, fp16 or fp32).
        packed: weight_packed [N, K/2] uint8.
        scale: weight_scale [N, K/32] uint8.
        backend: None (CUDA -> Triton, CPU -> torch), "triton" or "torch".
    Returns:
        y [M, N] in x's dtype.
    """
    _check(packed, scale)
    if x.shape[-1] != 2 * packed.shape[1]:
        raise ValueError(f"mxfp4_linear: x {tuple(x.shape)} does not match weight_packed {tuple(packed.shape)}")
    if not use_triton(x, backend, "mxfp4"):
        return mxfp4_linear_reference(x, packed, scale)
    from dayone.kernels.mxfp4.kernel import launch_linear

    x = x.contiguous()
    interpreting = os.environ.get("TRITON_INTERPRET") == "1"
    # The interpreter's fp32->bf16 cast truncates instead of rounding to nearest (triton 3.9), so under it the
    # kernel stores fp32 and torch rounds; on a GPU the kernel stores x's dtype itself.
    out = torch.empty(x.shape[0], packed.shape[0], dtype=torch.float32 if interpreting else x.dtype, device=x.device)
    launch_linear(x, packed.contiguous(), scale.contiguous(), out, interpreting or x.dtype == torch.float32)
    return out.to(x.dtype)
