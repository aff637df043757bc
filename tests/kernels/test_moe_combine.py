"""MoE combine: reference against a per-expert loop, Triton kernel (on the test device) against the reference."""

import pytest
import torch
from dayone.core.numerics import assert_close
from dayone.kernels.moe_combine import moe_combine
from dayone.kernels.moe_combine.aot import specializations
from dayone.kernels.moe_combine.reference import moe_combine_reference
from dayone.kernels.specialization import KernelDims


def make(t: int, k: int, width: int, dtype=torch.float32):
    torch.manual_seed(t * 100 + k * 10 + width)
    expert_out = torch.randn(t, k, width).to(dtype)
    weights = torch.rand(t, k)
    weights = weights / weights.sum(-1, keepdim=True)
    norm_weight = (1 + 0.1 * torch.randn(width)).to(dtype)
    return expert_out, weights, norm_weight


def test_reference_matches_loop():
    expert_out, weights, norm_weight = make(3, 4, 24)
    want = torch.zeros(3, 24, dtype=torch.float64)
    for t in range(3):
        for j in range(4):
            want[t] += float(weights[t, j]) * expert_out[t, j].double()
        want[t] = want[t] / torch.sqrt(want[t].pow(2).mean() + 1e-5) * norm_weight.double()
    assert_close(moe_combine_reference(expert_out, weights, norm_weight), want.float(), "fp32", what="reference")


@pytest.mark.parametrize("t,k,width", [(1, 1, 16), (5, 1, 40), (3, 4, 24), (2, 16, 100)])  # one expert; L not 2^n
@pytest.mark.parametrize("norm", [True, False])
def test_triton_fp32(device, t, k, width, norm):
    expert_out, weights, norm_weight = make(t, k, width)
    norm_weight = norm_weight if norm else None
    got = moe_combine(
        expert_out.to(device),
        weights.to(device),
        norm_weight if norm_weight is None else norm_weight.to(device),
        backend="triton",
    )
    want = moe_combine(expert_out, weights, norm_weight)
    assert_close(got, want, "fp32_kernel", what=f"moe_combine t={t} k={k} L={width} norm={norm}")


def test_triton_bf16_and_strided_experts(device):
    expert_out, weights, norm_weight = make(4, 8, 72, torch.bfloat16)
    padded = torch.cat([expert_out, expert_out], dim=-1).to(device)[..., :72]  # non-contiguous rows
    got = moe_combine(padded, weights.to(device), norm_weight.to(device), backend="triton")
    assert got.dtype == torch.bfloat16
    assert_close(got, moe_combine_reference(expert_out, weights, norm_weight), "bf16_kernel", what="bf16")


def test_zero_weights_give_zero_not_nan(device):
    expert_out, weights, norm_weight = make(2, 3, 16)
    zeros = torch.zeros_like(weights, device=device)
    got = moe_combine(expert_out.to(device), zeros, norm_weight.to(device), backend="triton")
    assert_close(got, torch.zeros(2, 16), "exact", what="zero weights")


def test_specializations():
    k3 = KernelDims(hidden_size=7168, moe_hidden_size=3584, num_experts=896, experts_per_token=16, latent_moe=True)
    linear = KernelDims(hidden_size=2304, moe_hidden_size=2304, num_experts=256, experts_per_token=8)
    (spec_k3,) = specializations(k3)
    (spec_linear,) = specializations(linear)
    assert spec_k3.constexprs == {"TOP_K": 16, "HAS_NORM": True, "BLOCK_L": 4096}
    assert spec_linear.constexprs == {"TOP_K": 8, "HAS_NORM": False, "BLOCK_L": 4096}
    for spec in (spec_k3, spec_linear):
        assert list(spec.signature) == spec.fn.arg_names
    assert specializations(KernelDims(hidden_size=64)) == []
