"""KDA's Triton kernels at head dims that are not powers of two (96 and 192 are in real models), on the test device
against the token-by-token fp32 reference: the tiles are padded to a power of two and the padding is masked.

K = V = 96 (tiles of 128) is the width of issue 15; K = 24, V = 40 (tiles of 32 and 64) puts K != V and a V block of
the output kernel that hangs over V. One head and short sequences keep the interpreter quick.
"""

import pytest
import torch
from dayone.core.numerics import assert_close
from dayone.kernels.kda import chunk_kda, kda_decode
from dayone.kernels.kda.reference import kda_reference
from test_kda import check_decode_and_verify, to
from test_kda import make_inputs as kda_inputs

WIDTHS = [pytest.param(96, 96, id="K96-V96"), pytest.param(24, 40, id="K24-V40")]
H = 1


def make_inputs(B, T, K, V, seed, dtype=torch.float32):
    return kda_inputs(B, T, dtype, seed, heads=H, k_dim=K, v_dim=V)


@pytest.mark.parametrize(("K", "V"), WIDTHS)
def test_chunk_varlen_with_initial_state(device, K, V):
    # Two packed sequences: 70 tokens (a chunk and 6 more) and 5; each starts from its own state.
    cu = torch.tensor([0, 70, 75])
    x = make_inputs(1, 75, K, V, seed=11)
    h0 = torch.randn(2, H, K, V, generator=torch.Generator().manual_seed(12))
    o, ht = chunk_kda(
        **to(device, x), gate="safe", initial_state=h0.to(device), cu_seqlens=cu.to(device), backend="triton"
    )
    ro, rht = kda_reference(**x, gate="safe", initial_state=h0, cu_seqlens=cu)
    assert o.shape == (1, 75, H, V) and ht.shape == (2, H, K, V)
    assert_close(o, ro, "fp32_kernel", what=f"o K={K} V={V}")
    assert_close(ht, rht, "fp32_kernel", what=f"final state K={K} V={V}")


def test_chunk_batched_bf16_at_head_dim_96(device):
    # B = 2 without cu_seqlens, T = 67 (a chunk and 3 tokens), the plain gate, bf16 inputs: tiles go to fp32 first.
    x = make_inputs(2, 67, 96, 96, seed=13, dtype=torch.bfloat16)
    o, ht = chunk_kda(**to(device, x), gate="plain", backend="triton")
    ro, rht = kda_reference(**x, gate="plain")
    assert o.dtype == torch.bfloat16
    assert_close(o, ro, "bf16_kernel", what="o")
    assert_close(ht, rht, "bf16_kernel", what="final state")


@pytest.mark.parametrize(("K", "V"), WIDTHS)
def test_decode_and_verify(device, K, V):
    x = make_inputs(3, 2, K, V, seed=14)
    pool = torch.randn(4, H, K, V, generator=torch.Generator().manual_seed(15))
    slots = torch.tensor([3, -1, 0], dtype=torch.int32)  # the middle request is CUDA-graph padding
    check_decode_and_verify(device, "triton", x, pool, slots, gate="plain")


def test_prefill_then_decode_at_head_dim_96(device):
    # 69 prefill tokens (not a multiple of the chunk) through the chunked kernels, the 70th through decode.
    x = make_inputs(1, 70, 96, 96, seed=16)
    ro, rht = kda_reference(**x, gate="safe")
    x = to(device, x)
    _, ht = chunk_kda(**{n: t[:, :69] if t.dim() > 2 else t for n, t in x.items()}, gate="safe", backend="triton")
    pool = torch.zeros(2, H, 96, 96, device=device)
    pool[1] = ht[0]
    last = {n: t[:, 69:] if t.dim() > 2 else t for n, t in x.items()}
    o = kda_decode(**last, state_pool=pool, slots=torch.tensor([1], device=device), gate="safe", backend="triton")
    assert_close(o[0, 0], ro[0, 69], "fp32_kernel", what="decoded token")
    assert_close(pool[1], rht[0], "fp32_kernel", what="state after decode")
