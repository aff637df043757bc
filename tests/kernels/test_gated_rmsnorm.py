"""Gated RMSNorm (Triton, and torch) on the test device against the fp32 reference."""

import pytest
import torch
from dayone.core.numerics import assert_close
from dayone.kernels.gated_rmsnorm import gated_rmsnorm
from dayone.kernels.gated_rmsnorm.reference import gated_rmsnorm_reference


@pytest.mark.parametrize("backend", ["torch", "triton"])
@pytest.mark.parametrize("V", [32, 24])  # 24: not a power of two, so the channel block is masked
def test_matches_reference(device, backend, V):
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(1, 37, 3, V, generator=gen)  # 111 rows: not a multiple of the row block
    gate = torch.randn(x.shape, generator=gen)
    weight = torch.randn(V, generator=gen)
    want = gated_rmsnorm_reference(x, gate, weight, 1e-5)
    want_bf16 = gated_rmsnorm_reference(x.bfloat16(), gate.bfloat16(), weight)
    x, gate, weight = x.to(device), gate.to(device), weight.to(device)
    assert_close(gated_rmsnorm(x, gate, weight, 1e-5, backend=backend), want, "fp32_kernel", what="fp32")
    got = gated_rmsnorm(x.bfloat16(), gate.bfloat16(), weight, 1e-5, backend=backend)
    assert got.dtype == torch.bfloat16
    assert_close(got, want_bf16, "bf16_kernel", what="bf16")


def test_rejects_mismatched_gate():
    with pytest.raises(ValueError, match="gate must match"):
        gated_rmsnorm(torch.zeros(2, 8), torch.zeros(2, 4), torch.ones(8))
