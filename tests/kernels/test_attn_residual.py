"""Attention-residual aggregation: reference against a per-token loop, Triton kernel (test device) against it."""

import pytest
import torch
from dayone.core.numerics import assert_close
from dayone.kernels.attn_residual import attn_res_aggregate, combined_score_weight
from dayone.kernels.attn_residual.aot import specializations
from dayone.kernels.specialization import KernelDims


def make(t: int, n: int, d: int, dtype=torch.float32):
    torch.manual_seed(t * 100 + n * 10 + d)
    # rows of very different scales: the weightless norm must make the scores scale-free
    bank = torch.randn(t, n, d) * torch.logspace(-2, 2, max(n, 1))[:n, None]
    prefix = torch.randn(t, d) * 5
    w_comb = combined_score_weight(1 + 0.1 * torch.randn(d), torch.randn(1, d))
    norm_weight = 1 + 0.1 * torch.randn(d)
    return bank.to(dtype), prefix.to(dtype), w_comb, norm_weight.to(dtype)


def loop_aggregate(bank, prefix, w_comb, norm_weight, eps):
    """Token by token, row by row, in fp64 with an explicit exp-normalise softmax."""
    out = torch.empty(prefix.shape, dtype=torch.float64)
    for t in range(prefix.shape[0]):
        rows = [bank[t, i].double() for i in range(bank.shape[1])] + [prefix[t].double()]
        scores = [float((r / torch.sqrt(r.pow(2).mean() + eps)) @ w_comb.double()) for r in rows]
        top = max(scores)
        e = [torch.exp(torch.tensor(s - top, dtype=torch.float64)) for s in scores]
        mixed = sum(ei * r for ei, r in zip(e, rows)) / sum(e)
        out[t] = mixed / torch.sqrt(mixed.pow(2).mean() + eps) * norm_weight.double()
    return out


def test_reference_matches_loop():
    bank, prefix, w_comb, norm_weight = make(3, 4, 32)
    got = attn_res_aggregate(bank, prefix, w_comb, norm_weight, 1e-5)
    assert_close(got, loop_aggregate(bank, prefix, w_comb, norm_weight, 1e-5).float(), "fp32", what="reference")


@pytest.mark.parametrize("t,n,d", [(1, 0, 16), (2, 1, 48), (3, 8, 40), (2, 9, 64)])  # empty bank .. 10 rows
def test_triton_fp32(device, t, n, d):
    bank, prefix, w_comb, norm_weight = make(t, n, d)
    on_device = (x.to(device) for x in (bank, prefix, w_comb, norm_weight))
    got, got_mixed = attn_res_aggregate(*on_device, return_mixed=True, backend="triton")
    want, want_mixed = attn_res_aggregate(bank, prefix, w_comb, norm_weight, return_mixed=True)
    assert_close(got_mixed, want_mixed, "fp32_kernel", what=f"mixed t={t} n={n} d={d}")
    assert_close(got, want, "fp32_kernel", what=f"out t={t} n={n} d={d}")


def test_triton_bf16_bank_stored_row_major(device):
    bank, prefix, w_comb, norm_weight = make(4, 5, 96, torch.bfloat16)
    store = bank.transpose(0, 1).contiguous().to(device)  # [n, T, D]: appending a snapshot is one row of the store
    on_device = (x.to(device) for x in (prefix, w_comb, norm_weight))
    got = attn_res_aggregate(store.transpose(0, 1), *on_device, backend="triton")
    assert got.dtype == torch.bfloat16
    assert_close(got, attn_res_aggregate(bank, prefix, w_comb, norm_weight), "bf16_kernel", what="bf16 strided bank")


def test_empty_bank_is_rmsnorm_of_prefix(device):
    _, prefix, w_comb, norm_weight = make(2, 0, 32)
    want = prefix * torch.rsqrt(prefix.pow(2).mean(-1, keepdim=True) + 1e-5) * norm_weight
    got = attn_res_aggregate(None, *(x.to(device) for x in (prefix, w_comb, norm_weight)), backend="triton")
    assert_close(got, want, "fp32_kernel")


def test_dominant_row_and_zero_rows(device):
    # a huge score puts all weight on one row (softmax must not overflow); an all-zero row scores 0, not NaN
    d = 16
    w_comb = torch.ones(d, device=device) * 1e4
    bank = torch.stack([torch.ones(2, d), torch.zeros(2, d)], dim=1).to(device)
    prefix = -torch.ones(2, d, device=device)
    ones = torch.ones(d, device=device)
    got, mixed = attn_res_aggregate(bank, prefix, w_comb, ones, return_mixed=True, backend="triton")
    assert_close(mixed, torch.ones(2, d), "fp32_kernel", what="dominant row")
    assert torch.isfinite(got).all()


def test_specializations():
    (spec,) = specializations(KernelDims(hidden_size=7168, attn_res_max_rows=9))
    assert spec.constexprs == {"STORE_MIXED": False, "BLOCK_D": 8192}
    assert list(spec.signature) == spec.fn.arg_names
    assert specializations(KernelDims(hidden_size=2304)) == []
