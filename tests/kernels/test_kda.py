"""KDA kernels (Triton in the interpreter, and the torch fast tier) against the token-by-token fp32 reference."""

import pytest
import torch
from dayone.kernels.kda import chunk_kda, commit_accepted, kda_decode
from dayone.kernels.kda.reference import kda_decode_reference, kda_reference
from dayone.numerics import assert_close

H, K, V = 2, 16, 32


def make_inputs(B, T, dtype=torch.float32, seed=0):
    gen = torch.Generator().manual_seed(seed)

    def randn(*shape):
        return torch.randn(*shape, generator=gen).to(dtype)

    return {
        "q": randn(B, T, H, K),
        "k": randn(B, T, H, K),
        "v": randn(B, T, H, V),
        "g": randn(B, T, H, K),
        "beta": randn(B, T, H),
        "A_log": torch.randn(H, generator=gen) * 0.5,
        "dt_bias": torch.randn(H * K, generator=gen),
    }


# Packed: a one-token sequence, one crossing the chunk boundary (69 = 64 + 5), a short tail, and an empty one.
CU_SEQLENS = torch.tensor([0, 1, 70, 75, 75])


@pytest.mark.parametrize("backend", ["torch", "triton"])
@pytest.mark.parametrize("gate", ["plain", "safe"])
def test_chunk_packed_with_initial_state(backend, gate):
    x = make_inputs(1, 75)
    h0 = torch.randn(4, H, K, V)
    o, ht = chunk_kda(**x, gate=gate, initial_state=h0, cu_seqlens=CU_SEQLENS, backend=backend)
    ro, rht = kda_reference(**x, gate=gate, initial_state=h0, cu_seqlens=CU_SEQLENS)
    assert_close(o, ro, "fp32_kernel", what=f"o {backend} {gate}")
    assert_close(ht, rht, "fp32_kernel", what=f"final state {backend} {gate}")


@pytest.mark.parametrize("backend", ["torch", "triton"])
def test_chunk_batched_precomputed_decay(backend):
    # B = 2 without cu_seqlens, T = 66 (two chunks, the second of 2 tokens), log-decay given directly, no h0.
    x = make_inputs(2, 66, seed=1)
    x["g"] = -torch.rand(2, 66, H, K) * 3
    o, ht = chunk_kda(**x, gate="none", backend=backend)
    ro, rht = kda_reference(**x, gate="none")
    assert_close(o, ro, "fp32_kernel", what="o")
    assert_close(ht, rht, "fp32_kernel", what="final state")


def test_chunk_bf16_triton():
    x = make_inputs(1, 75, dtype=torch.bfloat16, seed=2)
    o, ht = chunk_kda(**x, gate="safe", cu_seqlens=CU_SEQLENS, backend="triton")
    ro, rht = kda_reference(**x, gate="safe", cu_seqlens=CU_SEQLENS)
    assert o.dtype == torch.bfloat16 and ht.dtype == torch.float32
    assert_close(o, ro, "bf16_kernel", what="o")
    assert_close(ht, rht, "bf16_kernel", what="final state")


def decode_inputs(N, T, seed):
    x = make_inputs(N, T, seed=seed)
    pool = torch.randn(6, H, K, V, generator=torch.Generator().manual_seed(seed))
    return x, pool


@pytest.mark.parametrize("backend", ["torch", "triton"])
def test_decode_and_verify(backend):
    x, pool = decode_inputs(3, 3, seed=3)
    slots = torch.tensor([5, -1, 1], dtype=torch.int32)  # the middle request is CUDA-graph padding
    live = [0, 2]
    ro, rstates = kda_decode_reference(**x, state_pool=pool, slots=slots.clamp(min=0), gate="safe")

    verify_pool = pool.clone()
    inter = torch.zeros(3, 3, H, K, V)
    o = kda_decode(**x, state_pool=verify_pool, slots=slots, gate="safe", intermediate_states=inter, backend=backend)
    assert torch.equal(verify_pool, pool), "verify must not touch the pool"
    assert_close(o[live], ro[live], "fp32_kernel", what="verify o")
    assert_close(inter[live], rstates[live], "fp32_kernel", what="intermediate states")
    assert torch.equal(o[1], torch.zeros_like(o[1])), "padding requests read as zeros"

    o2 = kda_decode(**x, state_pool=pool, slots=slots, gate="safe", backend=backend)
    assert torch.equal(o2, o), "decode and verify do the same arithmetic"
    assert torch.equal(pool[[5, 1]], inter[live, -1]), "decode leaves the last state in the slot"


@pytest.mark.parametrize("backend", ["torch", "triton"])
def test_prefill_then_decode_continues_the_sequence(backend):
    x = make_inputs(1, 70, seed=4)
    _, ht = chunk_kda(**{n: t[:, :69] if t.dim() > 2 else t for n, t in x.items()}, gate="plain", backend=backend)
    pool = torch.zeros(3, H, K, V)
    pool[2] = ht[0]
    last = {n: t[:, 69:] if t.dim() > 2 else t for n, t in x.items()}
    o = kda_decode(**last, state_pool=pool, slots=torch.tensor([2]), gate="plain", backend=backend)
    ro, rht = kda_reference(**x, gate="plain")
    assert_close(o[0, 0], ro[0, 69], "fp32_kernel", what="decoded token")
    assert_close(pool[2], rht[0], "fp32_kernel", what="state after decode")


# --- speculative decoding: draft k tokens, verify, keep the accepted prefix --------------------------------------
VOCAB, STEPS, DRAFT = 11, 14, 3


class ToyModel:
    """One KDA layer: token embeddings give q, k, v, g, beta; the next token is argmax of a readout of o."""

    def __init__(self, seed=5):
        gen = torch.Generator().manual_seed(seed)
        self.table = {n: torch.randn(VOCAB, H, d, generator=gen) for n, d in (("q", K), ("k", K), ("v", V), ("g", K))}
        self.beta = torch.randn(VOCAB, H, generator=gen)
        self.A_log = torch.randn(H, generator=gen) * 0.5
        self.dt_bias = torch.randn(H * K, generator=gen)
        self.readout = torch.randn(H * V, VOCAB, generator=gen)

    def step(self, tokens, pool, slot, backend, inter=None):
        """Run tokens [T] of one request; returns o [T, H, V] and the greedy next token after each."""
        ids = torch.tensor(tokens)
        feats = {n: t[ids][None] for n, t in self.table.items()}
        o = kda_decode(
            **feats, beta=self.beta[ids][None], state_pool=pool, slots=torch.tensor([slot]), A_log=self.A_log,
            dt_bias=self.dt_bias, gate="safe", intermediate_states=inter, backend=backend,
        )[0]  # fmt: skip
        return o, (o.reshape(len(tokens), -1) @ self.readout).argmax(-1).tolist()


@pytest.mark.parametrize("backend", ["torch", "triton"])
def test_speculative_decoding_matches_step_by_step(backend):
    model = ToyModel()
    h0 = torch.randn(1, H, K, V, generator=torch.Generator().manual_seed(6))

    # Plain decoding: one token per step.
    pool = torch.zeros(2, H, K, V)
    pool[1] = h0[0]
    tokens, outs = [3], []
    for _ in range(STEPS):
        o, nxt = model.step(tokens[-1:], pool, 1, backend)
        outs.append(o[0])
        tokens.append(nxt[0])
    plain_state = pool[1].clone()

    # Speculative: a drafter that knows the answer but is wrong at every third position, so acceptance varies.
    def draft(pos):
        known = [tokens[p] if p < len(tokens) else 0 for p in range(pos, pos + DRAFT)]
        return [t if p % 3 else (t + 1) % VOCAB for p, t in zip(range(pos, pos + DRAFT), known)]

    pool = torch.zeros(2, H, K, V)
    pool[1] = h0[0]
    spec_tokens, spec_outs, lengths = [3], [], set()
    while len(spec_outs) < STEPS:
        drafts = draft(len(spec_tokens))
        inputs = [spec_tokens[-1]] + drafts
        inter = torch.zeros(1, len(inputs), H, K, V)
        o, preds = model.step(inputs, pool, 1, backend, inter)
        accepted = 1
        while accepted < len(inputs) and inputs[accepted] == preds[accepted - 1]:
            accepted += 1
        accepted = min(accepted, STEPS - len(spec_outs))
        lengths.add(accepted)
        commit_accepted(pool, torch.tensor([1]), inter, torch.tensor([accepted]))
        spec_outs += list(o[:accepted])
        spec_tokens += inputs[1:accepted] + [preds[accepted - 1]]

    assert len(lengths) > 1, "the drafter should give varied acceptance lengths"
    assert spec_tokens == tokens
    # Same per-token arithmetic in both runs: bitwise equal.
    assert torch.equal(torch.stack(spec_outs), torch.stack(outs))
    assert torch.equal(pool[1], plain_state)
