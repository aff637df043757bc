"""MXFP4 (OCP MX E2M1 elements, E8M0 group scales) in plain torch: the truth the kernels are compared to.

Packing is compressed-tensors' `mxfp4-pack-quantized`:
    weight_packed U8 [out, in/2]   byte = code[2j] | code[2j+1] << 4 (low nibble = even column)
    weight_scale  U8 [out, in/32]  one E8M0 byte per 32 columns, scale = 2^(byte - 127)
An E2M1 code is bit 3 = sign, bits 0-2 = index into E2M1_VALUES; value = e2m1 * scale.

Edge cases, decided here and matched bit for bit by the kernels:
- scale byte 0 is 2^-127, a subnormal fp32; its table entry is exact (math.ldexp), never 0 or overflow.
- scale byte 255 is NaN in the OCP MX spec: every element of that group dequantizes to NaN (zeros included).
- scale byte 254 is 2^127: elements 0.5..1.5 stay finite, 2.0 and above overflow to +-inf in fp32 and bf16,
  as correct rounding demands. Quantization never emits 255 and never overflows (exponents are clamped).
- code 8 is -0.0 and dequantizes to -0.0.
Every finite result has at most two significant bits, so the bf16 output is exact (no rounding anywhere).
"""

from __future__ import annotations

import functools
import math

import torch
import torch.nn.functional as F

GROUP_SIZE = 32
E8M0_BIAS = 127
E8M0_NAN = 255
E2M1_VALUES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)
E2M1_MAX = 6.0
# exponent of the largest E2M1 magnitude (6 = 1.5 * 2^2): OCP's shared exponent is floor(log2(amax)) - this
E2M1_EMAX = 2


def code_values() -> tuple[float, ...]:
    """The value of each 4-bit E2M1 code 0..15: bit 3 the sign, bits 0-2 the index into E2M1_VALUES (8 is -0.0)."""
    return E2M1_VALUES + tuple(-v for v in E2M1_VALUES)


# The two tables are built once per device (functools.cache) and only read: validation dequantizes every expert
# matrix of every layer, thousands of calls for the README run's 93 layers, and building them each time (a Python
# loop of 256 ldexp) was 7% of its validate.
@functools.cache
def byte_values(device: torch.device | str = "cpu") -> torch.Tensor:
    """[256, 2] fp32: the two unscaled elements each packed byte holds, the low nibble's (the even column) first."""
    codes = torch.tensor(code_values(), dtype=torch.float32, device=device)
    byte = torch.arange(256, device=device)
    return torch.stack((codes[byte & 0x0F], codes[byte >> 4]), dim=-1)


@functools.cache
def scale_values(device: torch.device | str = "cpu") -> torch.Tensor:
    """[256] fp32: the factor each E8M0 byte stands for, 2^(byte - 127), exactly (math.ldexp: byte 0 is the
    subnormal 2^-127, not 0); byte 255 is NaN."""
    factors = [math.ldexp(1.0, byte - E8M0_BIAS) for byte in range(E8M0_NAN)] + [math.nan]
    return torch.tensor(factors, dtype=torch.float32, device=device)


def dequantize_mxfp4_reference(
    packed: torch.Tensor, scale: torch.Tensor, dtype: torch.dtype = torch.bfloat16
) -> torch.Tensor:
    """weight_packed [out, in/2] uint8 + weight_scale [out, in/32] uint8 -> weight [out, in] in `dtype`.

    Two table look-ups and one product per element: every product is exact in fp32 (at most two significant bits
    times a power of two; from 2^128 up it rounds to inf, as correct rounding of an overflow must), and a NaN group
    stays NaN whatever its codes (0 x NaN is NaN)."""
    rows, half = packed.shape
    # table look-ups (embedding: torch's fastest gather on a CPU, 4x indexing with a converted index)
    values = F.embedding(packed.int(), byte_values(packed.device)).view(rows, -1, GROUP_SIZE)  # [out, in/32, 32]
    factors = F.embedding(scale.int(), scale_values(packed.device)[:, None])  # [out, in/32, 1]
    return (values * factors).view(rows, 2 * half).to(dtype)


def mxfp4_linear_reference(x: torch.Tensor, packed: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """y = x @ W^T in fp32, returned in x's dtype. x [M, in]; packed [out, in/2]; scale [out, in/32] -> [M, out]."""
    weight = dequantize_mxfp4_reference(packed, scale, torch.float32)
    return (x.float() @ weight.T).to(x.dtype)


def _round_to_e2m1_index(magnitude: torch.Tensor) -> torch.Tensor:
    """Non-negative fp32 (already clamped to <= 6) -> nearest E2M1 index 0..7, ties to the even index.

    The midpoints between neighbours are 0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5. A tie goes to the even index, so the
    comparison is strict above an even index and inclusive above an odd one. (One boolean buffer reused and added in
    place: the synthesiser quantizes gigabytes of experts with this, and a new tensor per step doubled its time.)
    """
    index = torch.zeros_like(magnitude, dtype=torch.uint8)
    above = torch.empty_like(magnitude, dtype=torch.bool)
    for lower, midpoint in enumerate((0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0)):
        compare = torch.gt if lower % 2 == 0 else torch.ge
        index.add_(compare(magnitude, midpoint, out=above))
    return index


def quantize_mxfp4(weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """weight [out, in] (any float dtype, in % 32 == 0) -> (weight_packed [out, in/2] u8, weight_scale [out, in/32] u8).

    OCP MX / compressed-tensors recipe: per group of 32, shared exponent e = floor(log2(amax)) - 2, elements
    w / 2^e rounded to the nearest E2M1 value (ties to even) and saturated at +-6. Any group whose values are all
    representable (e2m1 * 2^k) round-trips exactly. An all-zero group gets scale byte 0. Signs are kept, so -0.0
    becomes code 8.
    """
    out_features, in_features = weight.shape
    if in_features % GROUP_SIZE:
        raise ValueError(f"quantize_mxfp4: in_features {in_features} is not a multiple of {GROUP_SIZE}")
    w = weight.float().reshape(out_features, in_features // GROUP_SIZE, GROUP_SIZE)
    magnitude = w.abs()
    amax = magnitude.amax(dim=-1)
    # frexp gives amax = m * 2^E with m in [0.5, 1), so floor(log2(amax)) = E - 1 exactly (log2 could round).
    _, e_amax = torch.frexp(amax)
    shared = (e_amax - 1 - E2M1_EMAX).clamp(-E8M0_BIAS, E8M0_BIAS)
    shared = torch.where(amax == 0, torch.full_like(shared, -E8M0_BIAS), shared)
    # |w| / 2^shared, by one exact power-of-two factor per group (ldexp broadcast to every element computes a power
    # per element); the sign is w's, which a positive factor keeps (-0.0 included).
    magnitude.mul_(torch.ldexp(torch.ones_like(amax), -shared)[..., None]).clamp_(max=E2M1_MAX)
    index = _round_to_e2m1_index(magnitude)
    codes = index | (torch.signbit(w).to(torch.uint8) << 3)
    codes = codes.reshape(out_features, in_features)
    packed = codes[:, 0::2] | (codes[:, 1::2] << 4)
    scale = (shared + E8M0_BIAS).to(torch.uint8)
    return packed.contiguous(), scale.contiguous()
