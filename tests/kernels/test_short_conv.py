"""Short convolution (Triton, and torch) on the test device against the token-by-token fp32 reference."""

import pytest
import torch
from dayone.core.numerics import assert_close
from dayone.kernels.short_conv import commit_accepted, short_conv, short_conv_update
from dayone.kernels.short_conv.reference import short_conv_reference, short_conv_update_reference

D, W = 40, 4  # D not a multiple of the channel block
# Packed: one token (shorter than the window), two tokens, 17, an empty sequence, 17.
CU_SEQLENS = torch.tensor([0, 1, 3, 20, 20, 37])


@pytest.mark.parametrize("backend", ["torch", "triton"])
@pytest.mark.parametrize("with_state", [False, True])
def test_prefill_packed(device, backend, with_state):
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(1, 37, D, generator=gen)
    weight = torch.randn(D, 1, W, generator=gen)  # the checkpoint's [D, 1, W] layout
    h0 = torch.randn(5, D, W - 1, generator=gen) if with_state else None
    ry, rht = short_conv_reference(x, weight, CU_SEQLENS, h0)
    x, weight, cu, h0 = (None if t is None else t.to(device) for t in (x, weight, CU_SEQLENS, h0))
    y, ht = short_conv(x, weight, cu_seqlens=cu, initial_state=h0, backend=backend)
    assert_close(y, ry, "fp32_kernel", what="y")
    assert_close(ht, rht, "exact", what="final conv state")  # the state is copied inputs: bitwise


@pytest.mark.parametrize("backend", ["torch", "triton"])
def test_batched_bf16(device, backend):
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(2, 9, D, generator=gen).bfloat16()
    weight = torch.randn(D, W, generator=gen)
    y, ht = short_conv(x.to(device), weight.to(device), backend=backend)
    ry, rht = short_conv_reference(x, weight)
    assert y.dtype == torch.bfloat16
    assert_close(y, ry, "bf16_kernel", what="y")
    assert_close(ht, rht, "exact", what="final conv state")


@pytest.mark.parametrize("backend", ["torch", "triton"])
def test_decode_update_in_place(device, backend):
    gen = torch.Generator().manual_seed(2)
    pool = torch.randn(6, D, W - 1, generator=gen)
    x = torch.randn(3, D, generator=gen)
    weight = torch.randn(D, W, generator=gen)
    slots = torch.tensor([5, -1, 2], dtype=torch.int32)  # the middle request is padding
    ry, rpool, _ = short_conv_update_reference(x, weight, pool, slots)
    pool = pool.to(device)
    y = short_conv_update(x.to(device), weight.to(device), pool, slots.to(device), backend=backend)
    assert_close(y, ry, "fp32_kernel", what="y")
    assert_close(pool, rpool, "exact", what="conv state pool")


@pytest.mark.parametrize("backend", ["torch", "triton"])
def test_prefill_then_decode_continues_the_sequence(device, backend):
    gen = torch.Generator().manual_seed(3)
    x = torch.randn(1, 6, D, generator=gen)
    weight = torch.randn(D, W, generator=gen)
    ry, rht = short_conv_reference(x, weight)
    x, weight = x.to(device), weight.to(device)
    _, ht = short_conv(x[:, :5], weight, backend=backend)
    pool = torch.zeros(2, D, W - 1, device=device)
    pool[1] = ht[0]
    y = short_conv_update(x[0, 5:], weight, pool, torch.tensor([1], device=device), backend=backend)
    assert_close(y[0], ry[0, 5], "fp32_kernel", what="decoded token")
    assert_close(pool[1], rht[0], "exact", what="conv state")


@pytest.mark.parametrize("backend", ["torch", "triton"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_verify_writes_every_state_and_commits_the_accepted_one(device, backend, dtype):
    # T = 5 draft tokens, more than the window, so late states hold no input from the pool.
    gen = torch.Generator().manual_seed(4)
    pool = torch.randn(6, D, W - 1, generator=gen).to(dtype)
    x = torch.randn(3, 5, D, generator=gen).to(dtype)
    weight = torch.randn(D, W, generator=gen)
    slots = torch.tensor([5, -1, 2], dtype=torch.int32)
    ry, rpool, rstates = short_conv_update_reference(x, weight, pool, slots)

    pool, x, weight, slots = pool.to(device), x.to(device), weight.to(device), slots.to(device)
    rstates = rstates.to(device)  # copies of inputs: compared bitwise below, on the device
    verify_pool = pool.clone()
    inter = torch.zeros(3, 5, D, W - 1, dtype=dtype, device=device)
    y = short_conv_update(x, weight, verify_pool, slots, intermediate_states=inter, backend=backend)
    assert y.shape == x.shape and y.dtype == dtype
    assert torch.equal(verify_pool, pool), "verify must not touch the pool"
    assert_close(y, ry, "fp32_kernel" if dtype == torch.float32 else "bf16_kernel", what="verify y")
    assert_close(inter[[0, 2]], rstates[[0, 2]], "exact", what="intermediate conv states")  # copied inputs
    assert torch.equal(y[1], torch.zeros_like(y[1])), "padding requests read as zeros"

    decoded = pool.clone()
    assert torch.equal(short_conv_update(x, weight, decoded, slots, backend=backend), y), "decode == verify"
    assert_close(decoded, rpool, "exact", what="pool after decoding all T tokens")

    commit_accepted(verify_pool, slots, inter, torch.tensor([2, 3, 0], device=device))
    assert torch.equal(verify_pool[5], rstates[0, 1]), "request 0 keeps the state after its second token"
    assert torch.equal(verify_pool[2], pool[2]), "zero accepted leaves the slot"
    assert torch.equal(verify_pool[[0, 1, 3, 4]], pool[[0, 1, 3, 4]])
