"""Speculative decoding end to end on a toy KDA block: draft, verify, keep the accepted prefix of both states.

The block is what an engine runs per KDA layer at decode time: a short conv over the q/k/v projections (its conv
window state in one pool) and the KDA recurrence (its state in another). Greedy decoding that drafts DRAFT tokens per
step and verifies them must give exactly the tokens, outputs and states of one-token-at-a-time greedy decoding.
"""

import os
import subprocess
import sys

import pytest
import torch
from dayone.kernels.kda import commit_accepted, kda_decode
from dayone.kernels.short_conv import short_conv_update

H, K, V, W = 2, 16, 32, 4
D = H * (K + K + V)  # conv channels: q, k and v projections; a multiple of 16 so no vector tail loop differs
VOCAB, STEPS, DRAFT = 11, 12, 3
SLOTS = torch.tensor([1, -1, 3], dtype=torch.int32)  # two live requests and a CUDA-graph padding request
START = [3, 7, 0]


class ToyBlock:
    """Token embeddings give the conv input, the raw gate and beta; the next token is argmax of a readout of o."""

    def __init__(self, device="cpu", seed=5):
        gen = torch.Generator().manual_seed(seed)
        self.embed = torch.randn(VOCAB, D, generator=gen)
        self.conv_weight = torch.randn(D, W, generator=gen) * 0.5
        self.g = torch.randn(VOCAB, H, K, generator=gen)
        self.beta = torch.randn(VOCAB, H, generator=gen)
        self.A_log = torch.randn(H, generator=gen) * 0.5
        self.dt_bias = torch.randn(H * K, generator=gen)
        self.readout = torch.randn(H * V, VOCAB, generator=gen)
        self.__dict__.update({name: t.to(device) for name, t in vars(self).items()})  # made on the CPU, same values
        self.device = device

    def step(self, tokens, conv_pool, kda_pool, backend, verify=False):
        """tokens: [N, T] ints. Returns o [N, T, H, V], the greedy next tokens [N, T] and, when verifying, the
        intermediate (conv, KDA) states; otherwise (decode, T = 1) both pools advance in place."""
        ids = torch.tensor(tokens)
        N, T = ids.shape
        inter_conv = torch.zeros(N, T, D, W - 1, device=self.device) if verify else None
        inter_kda = torch.zeros(N, T, H, K, V, device=self.device) if verify else None
        slots = SLOTS.to(self.device)
        x = self.embed[ids] if verify else self.embed[ids[:, 0]]  # decode uses the one-token [N, D] form
        y = short_conv_update(
            x, self.conv_weight, conv_pool, slots, intermediate_states=inter_conv, backend=backend
        ).view(N, T, D)
        q, k, v = y.split([H * K, H * K, H * V], dim=-1)
        o = kda_decode(
            q.reshape(N, T, H, K), k.reshape(N, T, H, K), v.reshape(N, T, H, V), self.g[ids], self.beta[ids],
            kda_pool, slots, self.A_log, self.dt_bias, gate="safe", intermediate_states=inter_kda, backend=backend,
        )  # fmt: skip
        return o, (o.reshape(N, T, -1) @ self.readout).argmax(-1).tolist(), (inter_conv, inter_kda)


def fresh_pools(device="cpu"):
    gen = torch.Generator().manual_seed(6)
    return torch.randn(4, D, W - 1, generator=gen).to(device), torch.randn(4, H, K, V, generator=gen).to(device)


@pytest.mark.parametrize("backend", ["torch", "triton"])
def test_draft_and_verify_matches_greedy_decoding(device, backend):
    block = ToyBlock(device)
    live = [n for n, s in enumerate(SLOTS.tolist()) if s >= 0]

    # Greedy decoding, one token per step, far enough to cover the longest speculative run; keep every state.
    conv_pool, kda_pool = fresh_pools(device)
    tokens, outs = [[t] for t in START], [[] for _ in START]
    conv_after, kda_after = [conv_pool.clone()], [kda_pool.clone()]  # [i]: the pools after i tokens
    for _ in range(STEPS + DRAFT + 1):
        o, nxt, _ = block.step([seq[-1:] for seq in tokens], conv_pool, kda_pool, backend)
        for n in live:
            outs[n].append(o[n, 0])
            tokens[n].append(nxt[n][0])
        conv_after.append(conv_pool.clone())
        kda_after.append(kda_pool.clone())

    # Speculative: a drafter that knows the answer but is wrong every third position (shifted per request), so
    # acceptance lengths vary and differ between the requests of one batch.
    def draft(n, pos):
        return [t if (p + n) % 3 else (t + 1) % VOCAB for p, t in enumerate(tokens[n][pos : pos + DRAFT], pos)]

    conv_pool, kda_pool = fresh_pools(device)
    untouched = [conv_pool[[0, 2]].clone(), kda_pool[[0, 2]].clone()]
    spec = [[t] for t in START]
    spec_outs = [[] for _ in START]
    lengths = set()
    while min(len(spec_outs[n]) for n in live) < STEPS:
        inputs = [seq[-1:] + (draft(n, len(seq)) if n in live else [0] * DRAFT) for n, seq in enumerate(spec)]
        o, preds, (inter_conv, inter_kda) = block.step(inputs, conv_pool, kda_pool, backend, verify=True)
        accepted = torch.ones(len(inputs), dtype=torch.long)
        for n in live:
            while accepted[n] <= DRAFT and inputs[n][accepted[n]] == preds[n][accepted[n] - 1]:
                accepted[n] += 1
            a = int(accepted[n])
            lengths.add(a)
            spec_outs[n] += list(o[n, :a])
            spec[n] += inputs[n][1:a] + [preds[n][a - 1]]
        commit_accepted(conv_pool, SLOTS.to(device), inter_conv, accepted.to(device))
        commit_accepted(kda_pool, SLOTS.to(device), inter_kda, accepted.to(device))

    assert len(lengths) > 1, "the drafter should give varied acceptance lengths"
    for n in live:
        used = len(spec_outs[n])
        assert spec[n] == tokens[n][: used + 1]
        # Same per-token arithmetic in both runs: bitwise equal outputs and states.
        assert torch.equal(torch.stack(spec_outs[n]), torch.stack(outs[n][:used]))
        slot = int(SLOTS[n])
        assert torch.equal(conv_pool[slot], conv_after[used][slot]), f"conv state of request {n}"
        assert torch.equal(kda_pool[slot], kda_after[used][slot]), f"KDA state of request {n}"
    assert torch.equal(conv_pool[[0, 2]], untouched[0]) and torch.equal(kda_pool[[0, 2]], untouched[1])


@pytest.mark.parametrize("capability", ["avx2", "default"])
def test_bitwise_without_avx512(capability):
    """The same test with torch's CPU kernels limited to AVX2 (or to no vectors at all), as on CPUs without AVX-512:
    vector width changes which elements take the scalar tail, and the equality must not depend on it."""
    env = {**os.environ, "ATEN_CPU_CAPABILITY": capability, "DAYONE_TEST_DEVICE": "cpu"}  # a CPU matter on any machine
    node = f"{__file__}::test_draft_and_verify_matches_greedy_decoding[cpu-torch]"
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", node], env=env,
                          capture_output=True, text=True, timeout=300, check=False)  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:]
