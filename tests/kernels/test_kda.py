"""KDA kernels (Triton, and the torch fast tier) on the test device against the token-by-token fp32 reference."""

import pytest
import torch
from dayone.core.numerics import assert_close
from dayone.kernels.kda import chunk_kda, kda_decode
from dayone.kernels.kda.reference import kda_decode_reference, kda_reference

H, K, V = 2, 16, 32
# The torch tier is a different association order of the same fp32 math ("fp32"); the interpreter is looser.
TOLERANCE = {"torch": "fp32", "triton": "fp32_kernel"}


def make_inputs(B, T, dtype=torch.float32, seed=0, heads=H, k_dim=K, v_dim=V):
    """q, k, v, raw gate, beta logits [B, T, heads, *] in dtype and the gate's A_log [heads], dt_bias [heads * k_dim]
    in fp32, from one seeded generator, on the CPU."""
    gen = torch.Generator().manual_seed(seed)

    def randn(*shape):
        return torch.randn(*shape, generator=gen).to(dtype)

    return {
        "q": randn(B, T, heads, k_dim),
        "k": randn(B, T, heads, k_dim),
        "v": randn(B, T, heads, v_dim),
        "g": randn(B, T, heads, k_dim),
        "beta": randn(B, T, heads),
        "A_log": torch.randn(heads, generator=gen) * 0.5,
        "dt_bias": torch.randn(heads * k_dim, generator=gen),
    }


def to(device, x):
    """The inputs, made on the CPU, on the device under test."""
    return {n: t.to(device) for n, t in x.items()}


# Packed: a one-token sequence, one crossing the chunk boundary (69 = 64 + 5), a short tail, and an empty one.
CU_SEQLENS = torch.tensor([0, 1, 70, 75, 75])


@pytest.mark.parametrize("backend", ["torch", "triton"])
@pytest.mark.parametrize("gate", ["plain", "safe"])
def test_chunk_packed_with_initial_state(device, backend, gate):
    x = make_inputs(1, 75)
    h0 = torch.randn(4, H, K, V)
    o, ht = chunk_kda(
        **to(device, x), gate=gate, initial_state=h0.to(device), cu_seqlens=CU_SEQLENS.to(device), backend=backend
    )
    ro, rht = kda_reference(**x, gate=gate, initial_state=h0, cu_seqlens=CU_SEQLENS)
    assert_close(o, ro, TOLERANCE[backend], what=f"o {backend} {gate}")
    assert_close(ht, rht, TOLERANCE[backend], what=f"final state {backend} {gate}")


@pytest.mark.parametrize("backend", ["torch", "triton"])
def test_chunk_batched_precomputed_decay(device, backend):
    # B = 2 without cu_seqlens, T = 66 (two chunks, the second of 2 tokens), log-decay given directly, no h0.
    x = make_inputs(2, 66, seed=1)
    x["g"] = -torch.rand(2, 66, H, K) * 3
    o, ht = chunk_kda(**to(device, x), gate="none", backend=backend)
    ro, rht = kda_reference(**x, gate="none")
    assert_close(o, ro, TOLERANCE[backend], what="o")
    assert_close(ht, rht, TOLERANCE[backend], what="final state")


def packed_decay_inputs(seed):
    """Three packed sequences of several chunks each (the torch tier batches their state passing), an initial state."""
    x = make_inputs(1, 200, seed=seed)
    gen = torch.Generator().manual_seed(seed + 1)
    return x, torch.tensor([0, 64, 130, 200]), torch.randn(3, H, K, V, generator=gen), gen


@pytest.mark.parametrize("backend", ["torch", "triton"])
def test_chunk_extreme_decay_stays_finite(device, backend):
    # Per-channel decays at the safe gate's bound and far beyond: the in-chunk cumsum reaches -64 * 40, and only
    # exponents taken relative to a nearby token keep exp() finite.
    x, cu, h0, gen = packed_decay_inputs(7)
    x["g"] = torch.where(torch.rand(1, 200, H, K, generator=gen) < 0.5, -5.0, -40.0)
    o, ht = chunk_kda(
        **to(device, x), gate="none", initial_state=h0.to(device), cu_seqlens=cu.to(device), backend=backend
    )
    ro, rht = kda_reference(**x, gate="none", initial_state=h0, cu_seqlens=cu)
    assert_close(o, ro, TOLERANCE[backend], what="o")
    assert_close(ht, rht, TOLERANCE[backend], what="final state")


@pytest.mark.parametrize("backend", ["torch", "triton"])
def test_chunk_keeps_small_decays_after_a_strong_one(device, backend):
    # A strong decay then almost none inside one chunk: the cumsum is ~-500 where the decays between two tokens are
    # ~-1e-3, so a difference of cumsums would be off by its ulp (3e-5, a 1.5e-4 relative error in o); both tiers sum
    # the decays between the two tokens instead, and meet the fp32 row (2.8e-7 relative in the interpreter).
    x, cu, h0, gen = packed_decay_inputs(9)
    x["g"] = torch.where(torch.rand(1, 200, H, K, generator=gen) < 0.5, -5.0, -40.0)
    x["g"][:, 150:] = -1e-3
    o, ht = chunk_kda(
        **to(device, x), gate="none", initial_state=h0.to(device), cu_seqlens=cu.to(device), backend=backend
    )
    ro, rht = kda_reference(**x, gate="none", initial_state=h0, cu_seqlens=cu)
    assert_close(o, ro, "fp32", what="o")
    assert_close(ht, rht, "fp32", what="final state")


@pytest.mark.parametrize("backend", ["torch", "triton"])
@pytest.mark.parametrize("with_h0", [False, True])
def test_chunk_empty_batch(device, backend, with_h0):
    # T = 0 without cu_seqlens: no tokens, so an empty output and the initial state (or zeros) as the final one.
    x = make_inputs(2, 0)
    h0 = torch.randn(2, H, K, V) if with_h0 else None
    o, ht = chunk_kda(
        **to(device, x), gate="safe", initial_state=None if h0 is None else h0.to(device), backend=backend
    )
    ro, rht = kda_reference(**x, gate="safe", initial_state=h0)
    assert o.shape == ro.shape == (2, 0, H, V)
    assert_close(ht, rht, "exact", what="final state")


def test_chunk_bf16_triton(device):
    x = make_inputs(1, 75, dtype=torch.bfloat16, seed=2)
    o, ht = chunk_kda(**to(device, x), gate="safe", cu_seqlens=CU_SEQLENS.to(device), backend="triton")
    ro, rht = kda_reference(**x, gate="safe", cu_seqlens=CU_SEQLENS)
    assert o.dtype == torch.bfloat16 and ht.dtype == torch.float32
    assert_close(o, ro, "bf16_kernel", what="o")
    assert_close(ht, rht, "bf16_kernel", what="final state")


def decode_inputs(N, T, seed):
    x = make_inputs(N, T, seed=seed)
    pool = torch.randn(6, H, K, V, generator=torch.Generator().manual_seed(seed))
    return x, pool


def check_decode_and_verify(device, backend, x, pool, slots, gate):
    """Verify (intermediate_states) against the reference, then decode from the same pool: the same outputs, the last
    state in each named slot, every other slot left alone; a request with a negative slot (CUDA-graph padding) reads
    as zeros. x: make_inputs' tensors of N requests of T tokens; pool: [P, H, K, V]; slots: [N] int32."""
    N, T = x["q"].shape[:2]
    live = [n for n in range(N) if slots[n] >= 0]
    padding = [n for n in range(N) if slots[n] < 0]
    ro, rstates = kda_decode_reference(**x, state_pool=pool, slots=slots.clamp(min=0), gate=gate)

    x, pool, slots = to(device, x), pool.to(device), slots.to(device)
    verify_pool = pool.clone()
    inter = torch.zeros(N, T, *pool.shape[1:], device=device)
    o = kda_decode(**x, state_pool=verify_pool, slots=slots, gate=gate, intermediate_states=inter, backend=backend)
    assert torch.equal(verify_pool, pool), "verify must not touch the pool"
    assert_close(o[live], ro[live], "fp32_kernel", what="verify o")
    assert_close(inter[live], rstates[live], "fp32_kernel", what="intermediate states")
    assert torch.equal(o[padding], torch.zeros_like(o[padding])), "padding requests read as zeros"

    o2 = kda_decode(**x, state_pool=pool, slots=slots, gate=gate, backend=backend)
    assert torch.equal(o2, o), "decode and verify do the same arithmetic"
    named = [int(slots[n]) for n in live]
    assert torch.equal(pool[named], inter[live, -1]), "decode leaves the last state in the slot"
    others = [p for p in range(pool.shape[0]) if p not in named]
    assert torch.equal(pool[others], verify_pool[others]), "slots no request names are left alone"


@pytest.mark.parametrize("backend", ["torch", "triton"])
def test_decode_and_verify(device, backend):
    x, pool = decode_inputs(3, 3, seed=3)
    slots = torch.tensor([5, -1, 1], dtype=torch.int32)  # the middle request is CUDA-graph padding
    check_decode_and_verify(device, backend, x, pool, slots, gate="safe")


@pytest.mark.parametrize("backend", ["torch", "triton"])
def test_prefill_then_decode_continues_the_sequence(device, backend):
    x = make_inputs(1, 70, seed=4)
    ro, rht = kda_reference(**x, gate="plain")
    x = to(device, x)
    _, ht = chunk_kda(**{n: t[:, :69] if t.dim() > 2 else t for n, t in x.items()}, gate="plain", backend=backend)
    pool = torch.zeros(3, H, K, V, device=device)
    pool[2] = ht[0]
    last = {n: t[:, 69:] if t.dim() > 2 else t for n, t in x.items()}
    o = kda_decode(**last, state_pool=pool, slots=torch.tensor([2], device=device), gate="plain", backend=backend)
    assert_close(o[0, 0], ro[0, 69], TOLERANCE[backend], what="decoded token")
    assert_close(pool[2], rht[0], TOLERANCE[backend], what="state after decode")
