"""SiTU/SiLU-and-mul: reference against an fp64 formulation, Triton kernel (on the test device) against it."""

import pytest
import torch
from dayone.core.numerics import assert_close
from dayone.kernels.situ import act_and_mul
from dayone.kernels.situ.aot import specializations
from dayone.kernels.situ.reference import situ_and_mul_reference
from dayone.kernels.specialization import KernelDims


def hostile_rows(t: int, width: int, dtype=torch.float32) -> torch.Tensor:
    """Random rows plus saturating magnitudes, exact zeros, tiny values (tanh's Taylor branch) and infinities."""
    torch.manual_seed(t * 1000 + width)
    x = torch.randn(t, width) * 3
    special = torch.tensor([0.0, -0.0, 1e-6, -1e-3, 0.9, -0.99, 1.01, 30.0, -30.0, 200.0, float("inf"), float("-inf")])
    n = min(len(special), width)
    x[0, :n] = special[:n]
    return x.to(dtype)


def test_reference_matches_fp64_exp_form():
    gate, up = hostile_rows(3, 40).chunk(2, dim=-1)
    g, u = gate.double(), up.double()

    def tanh64(v):  # written from exponentials, clipped where exp overflows
        v = v.clamp(-40, 40)
        return torch.expm1(2 * v) / (torch.exp(2 * v) + 1)

    want = 4.0 * tanh64(g / 4.0) / (1 + torch.exp(-g)) * (25.0 * tanh64(u / 25.0))
    assert_close(situ_and_mul_reference(gate, up, 4.0, 25.0), want.float(), "fp32", what="situ reference")


@pytest.mark.parametrize("activation", ["situ", "silu"])
@pytest.mark.parametrize("t,width", [(1, 2), (3, 96), (2, 2 * 1030)])  # I = 1, 48, 1030 (past one 1024 block)
def test_triton_fp32(device, activation, t, width):
    x = hostile_rows(t, width)
    if activation == "silu":
        x = x.nan_to_num(posinf=50.0, neginf=-50.0)  # silu * up is unbounded: inf * 0 would be NaN in both
    got = act_and_mul(x.to(device), activation=activation, backend="triton")
    assert_close(got, act_and_mul(x, activation=activation), "fp32_kernel", what=f"{activation} t={t} w={width}")


@pytest.mark.parametrize("activation", ["situ", "silu"])
def test_triton_bf16_separate_gate_up(device, activation):
    x = hostile_rows(4, 128, torch.bfloat16).nan_to_num(posinf=50.0, neginf=-50.0)
    gate, up = x.to(device)[:, :64], x.to(device)[:, 64:]  # strided views, as a fused projection hands them over
    got = act_and_mul(gate, up, activation=activation, backend="triton")
    assert got.dtype == torch.bfloat16 and got.shape == (4, 64)
    assert_close(got, act_and_mul(x, activation=activation), "bf16_kernel", what=f"{activation} bf16")


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")  # sigmoid(-1e4) overflows exp
def test_situ_is_bounded_and_custom_betas(device):
    x = torch.tensor([[1e4, -1e4, 1e4, 1e4]], device=device)
    out = act_and_mul(x, backend="triton")
    assert out[0].tolist() == pytest.approx([4.0 * 25.0, 0.0], abs=1e-3)
    got = act_and_mul(hostile_rows(2, 64).to(device), beta=2.0, linear_beta=3.0, backend="triton")
    assert_close(got, act_and_mul(hostile_rows(2, 64), beta=2.0, linear_beta=3.0), "fp32_kernel", what="betas")


def test_specializations():
    k3 = specializations(KernelDims(hidden_size=7168, activation="situ"))
    linear = specializations(KernelDims(hidden_size=2304, activation="silu"))
    assert k3[0].constexprs["SITU"] is True and linear[0].constexprs["SITU"] is False
    for spec in k3 + linear:
        assert list(spec.signature) == spec.fn.arg_names
        assert {k for k, v in spec.signature.items() if v == "constexpr"} == set(spec.constexprs)
