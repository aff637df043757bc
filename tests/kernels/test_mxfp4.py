"""MXFP4: reference against independent formulations, Triton kernels (on the test device) against the reference."""

import math

import pytest
import torch
from dayone.core.numerics import assert_close
from dayone.kernels.mxfp4 import dequantize_mxfp4, mxfp4_linear, quantize_mxfp4
from dayone.kernels.mxfp4.aot import specializations
from dayone.kernels.mxfp4.reference import E2M1_VALUES, dequantize_mxfp4_reference
from dayone.kernels.specialization import KernelDims


def scalar_dequant(byte: int, column: int, scale_byte: int) -> float:
    """One element the slow way: Python floats, math.ldexp, sign from bit 3."""
    code = (byte >> (4 * (column % 2))) & 0xF
    magnitude = E2M1_VALUES[code & 7]
    if scale_byte == 255:
        return math.nan
    value = math.ldexp(magnitude, scale_byte - 127)
    return -value if code & 8 else value


def all_bytes_weight(scale_bytes: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
    """Every packed byte 0..255 in each row; one row per scale byte. packed [R, 256], scale [R, 16]."""
    packed = torch.arange(256, dtype=torch.uint8).repeat(len(scale_bytes), 1)
    scale = torch.tensor(scale_bytes, dtype=torch.uint8)[:, None].repeat(1, 512 // 32)
    return packed, scale


HOSTILE_SCALES = [0, 1, 2, 100, 126, 127, 128, 200, 253, 254, 255]


def test_reference_dequant_matches_scalar_table():
    """Every packed byte under every scale byte (the whole domain: an element depends on its byte and scale alone)."""
    scales = list(range(256))
    packed, scale = all_bytes_weight(scales)
    got = dequantize_mxfp4_reference(packed, scale, torch.float32)
    want = torch.tensor(
        [[scalar_dequant(int(packed[r, c // 2]), c, s) for c in range(512)] for r, s in enumerate(scales)]
    )
    assert_close(got, want, "exact", what="reference vs scalar dequant")
    # sign of zero must survive: torch.equal treats -0.0 == 0.0, so compare sign bits
    assert torch.equal(torch.signbit(got.nan_to_num()), torch.signbit(want.nan_to_num()))
    assert 0 < got[0, 2] < torch.finfo(torch.float32).tiny  # byte 1, low nibble: 0.5 * 2^-127 is subnormal, not 0
    # bf16 holds every value exactly (infinities and NaN groups included)
    assert_close(dequantize_mxfp4_reference(packed, scale, torch.bfloat16).float(), got, "exact", what="bf16")


def test_reference_dequant_edge_values():
    packed, scale = all_bytes_weight([0, 254, 255])
    w = dequantize_mxfp4_reference(packed, scale, torch.bfloat16).float()
    assert torch.isnan(w[2]).all()  # scale 255: whole group NaN, zeros included
    big = w[1]
    assert torch.isfinite(big[(packed[1].repeat_interleave(2) == 0)]).all()
    assert big.isinf().any() and not big.isnan().any()  # 2^127 * {2..6} overflows to inf, never NaN
    assert (w[0] != 0).sum() > 0  # byte 0 scale keeps tiny values


@pytest.mark.parametrize("shape", [(3, 64), (5, 96)])
def test_quantize_round_trip_on_representable(shape):
    torch.manual_seed(0)
    out_features, in_features = shape
    codes = torch.randint(0, 16, shape, dtype=torch.uint8)
    exps = torch.randint(-130, 120, (out_features, in_features // 32)).repeat_interleave(32, dim=1)
    table = torch.tensor(E2M1_VALUES)
    w = torch.ldexp(torch.where(codes >= 8, -table[(codes & 7).long()], table[(codes & 7).long()]), exps)
    packed, scale = quantize_mxfp4(w)
    back = dequantize_mxfp4_reference(packed, scale, torch.float32)
    assert_close(back, w, "exact", what="quantize round trip")
    assert torch.equal(torch.signbit(back), torch.signbit(w))


def test_quantize_rounding_and_saturation():
    # one group: amax 6 -> scale 2^0; 0.25 ties to 0, 0.75 to 1, 2.5 to 2, 5 to 4, 5.1 to 6; -0.0 keeps its sign
    row = torch.zeros(32)
    row[:8] = torch.tensor([6.0, 0.25, 0.75, 2.5, 5.0, 5.1, -0.0, -1.3])
    packed, scale = quantize_mxfp4(row[None])
    back = dequantize_mxfp4_reference(packed, scale, torch.float32)[0]
    assert scale.item() == 127
    assert back[:8].tolist() == [6.0, 0.0, 1.0, 2.0, 4.0, 6.0, -0.0, -1.5]
    assert torch.signbit(back[6])
    # amax 7 -> shared exponent floor(log2 7) - 2 = 0: 7 saturates to 6 (OCP recipe), all-zero group -> byte 0
    packed, scale = quantize_mxfp4(torch.cat([torch.full((1, 32), 7.0), torch.zeros(1, 32)], dim=1))
    assert scale.tolist() == [[127, 0]]
    assert dequantize_mxfp4_reference(packed, scale, torch.float32)[0, 0].item() == 6.0


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")  # 6 * 2^127 -> inf, on purpose
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_triton_dequant_exact(device, dtype):
    packed, scale = all_bytes_weight(HOSTILE_SCALES)
    got = dequantize_mxfp4(packed.to(device), scale.to(device), dtype, backend="triton").cpu()
    want = dequantize_mxfp4_reference(packed, scale, dtype)
    assert_close(got, want, "exact", what="triton dequant")
    assert torch.equal(torch.signbit(got.float().nan_to_num()), torch.signbit(want.float().nan_to_num()))


def test_triton_dequant_ragged_rows(device):
    torch.manual_seed(1)
    packed = torch.randint(0, 256, (37, 48), dtype=torch.uint8)  # 37 rows, 96 columns: not multiples of the tiles
    scale = torch.randint(110, 140, (37, 3), dtype=torch.uint8)
    got = dequantize_mxfp4(packed.to(device), scale.to(device), backend="triton")
    assert_close(got, dequantize_mxfp4_reference(packed, scale), "exact", what="triton dequant ragged")


@pytest.mark.parametrize("m", [1, 3, 16, 17])
def test_triton_linear_fp32(device, m):
    torch.manual_seed(m)
    n, k = 40, 160  # k/2 = 80 packed bytes: one full tile and a masked one
    packed = torch.randint(0, 256, (n, k // 2), dtype=torch.uint8)
    scale = torch.randint(118, 132, (n, k // 32), dtype=torch.uint8)
    x = torch.randn(m, k)
    got = mxfp4_linear(x.to(device), packed.to(device), scale.to(device), backend="triton")
    assert_close(got, mxfp4_linear(x, packed, scale), "fp32_kernel", what=f"mxfp4_linear m={m}")


def test_triton_linear_bf16_matches_dequant_then_matmul(device):
    torch.manual_seed(2)
    packed = torch.randint(0, 256, (24, 64), dtype=torch.uint8)
    scale = torch.randint(120, 130, (24, 4), dtype=torch.uint8)
    x = torch.randn(2, 128).bfloat16()
    got = mxfp4_linear(x.to(device), packed.to(device), scale.to(device), backend="triton")
    dense = (x.float() @ dequantize_mxfp4(packed, scale).float().T).bfloat16()
    assert got.dtype == torch.bfloat16
    assert_close(got, dense, "bf16_kernel", what="mxfp4_linear bf16")


def test_specializations():
    k3 = KernelDims(hidden_size=7168, moe_hidden_size=3584, moe_intermediate_size=3072, mxfp4_group_size=32)
    specs = specializations(k3)
    assert [s.kernel for s in specs] == ["mxfp4.dequant", "mxfp4.linear"]
    for spec in specs:
        assert list(spec.signature) == spec.fn.arg_names
        assert {k for k, v in spec.signature.items() if v == "constexpr"} == set(spec.constexprs)
    assert specializations(KernelDims(hidden_size=2304)) == []
