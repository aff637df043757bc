"""The chunked KDA under autograd (`chunk_kda_autograd`, the training path on a CPU) against autograd of the
token-by-token recurrence in fp64, with K3's safe gate and its output gate (per-head RMSNorm times sigmoid(gate)).

The fp64 truth is written here from the formulas (`kda_reference`'s preprocessing, which is fp32 by design, spelled
out in fp64) and runs `reference.recurrence`, the readable per-token loop, in fp64. The path under test computes
in fp32, so every gradient is compared per tensor as max |error| / max |truth|, within GRAD_TOLERANCE (fp32
arithmetic over T = 75 tokens: measured 1e-7 to 4e-6; the bound leaves room for other CPUs' vector widths, and a
wrong term, e.g. a decay off by one token, is 1e-2 or more)."""

import itertools

import pytest
import torch
import torch.nn.functional as F
from dayone.kernels.kda.reference import recurrence
from dayone.kernels.kda.torch_chunk import chunk_kda_torch
from dayone.kernels.kda.torch_chunk_autograd import chunk_kda_autograd

H, K, V = 2, 16, 16
GRAD_TOLERANCE = 5e-5  # max |grad - grad64| / max |grad64|, per tensor
OUT_TOLERANCE = 1e-5
LOWER_BOUND = -5.0
NORM_EPS = 1e-5
# Packed: a one-token sequence, one crossing the chunk boundary (69 = 64 + 5), a short tail, and an empty one.
CU_SEQLENS = [0, 1, 70, 75, 75]


def inputs(seed=0, T=75, dtype=torch.float32):
    gen = torch.Generator().manual_seed(seed)

    def randn(*shape, s=1.0):
        return (torch.randn(*shape, generator=gen, dtype=torch.float64) * s).to(dtype).requires_grad_()

    return {
        "q": randn(1, T, H, K), "k": randn(1, T, H, K), "v": randn(1, T, H, V), "g": randn(1, T, H, K),
        "beta": randn(1, T, H), "A_log": randn(H, s=0.5), "dt_bias": randn(H * K),
        "gate": randn(1, T, H, V), "weight": randn(V, s=0.3), "h0": randn(3 + 1, H, K, V, s=0.1),
    }  # fmt: skip


def truth64(x, cu):
    """fp64 autograd truth: preprocessing from the formulas, the per-token recurrence, the output gate (any head
    count and width: tests/kernels/test_kda_triton_backward.py judges the Triton backward by it too)."""
    H, K = x["q"].shape[-2:]
    q, k, v, g, beta = (x[n].double() for n in ("q", "k", "v", "g", "beta"))
    qn = q / torch.sqrt(q.pow(2).sum(-1, keepdim=True) + 1e-6) * K**-0.5
    kn = k / torch.sqrt(k.pow(2).sum(-1, keepdim=True) + 1e-6)
    a = x["A_log"].double().exp().view(H, 1)
    log_decay = LOWER_BOUND * torch.sigmoid(a * (g + x["dt_bias"].double().view(H, K)))
    b = torch.sigmoid(beta)
    outs, finals = [], []
    for n, (bos, eos) in enumerate(itertools.pairwise(cu)):
        o, S = recurrence(qn[0, bos:eos], kn[0, bos:eos], v[0, bos:eos], log_decay[0, bos:eos], b[0, bos:eos],
                          x["h0"][n].double())  # fmt: skip
        outs.append(o)
        finals.append(S)
    o = torch.cat(outs)[None]
    return gated_norm(o, x["gate"].double(), x["weight"].double()), torch.stack(finals)


def gated_norm(o, gate, weight):
    return o / torch.sqrt(o.pow(2).mean(-1, keepdim=True) + NORM_EPS) * weight * torch.sigmoid(gate)


def under_test(x, cu, run=chunk_kda_autograd):
    o, final = run(x["q"], x["k"], x["v"], x["g"], x["beta"], x["A_log"], x["dt_bias"], "safe", LOWER_BOUND, None,
                   x["h0"], True, torch.tensor(cu), True, True)  # fmt: skip
    return F.rms_norm(o, (V,), x["weight"], NORM_EPS) * torch.sigmoid(x["gate"]), final


def loss(out, final, seed=3):
    """A loss that weighs every output and state element differently (a sum would hide a permutation)."""
    gen = torch.Generator().manual_seed(seed)
    wo = torch.randn(out.shape, generator=gen, dtype=torch.float64)
    ws = torch.randn(final.shape, generator=gen, dtype=torch.float64)
    return (out.double() * wo).sum() + (final.double() * ws).sum()


def grads(x, out, final):
    return dict(zip(x, torch.autograd.grad(loss(out, final), list(x.values()))))


@pytest.mark.parametrize("seed", [0, 1])
def test_chunked_gradients_match_fp64_recurrence(seed):
    x = inputs(seed)
    x64 = {n: t.detach().double().requires_grad_() for n, t in x.items()}
    out64, final64 = truth64(x64, CU_SEQLENS)
    want = grads(x64, out64, final64)
    out, final = under_test(x, CU_SEQLENS)
    assert (out.double() - out64).abs().max() < OUT_TOLERANCE
    assert (final.double() - final64).abs().max() < OUT_TOLERANCE
    got = grads(x, out, final)
    for name in x:
        err = float((got[name].double() - want[name]).abs().max() / want[name].abs().max())
        assert err < GRAD_TOLERANCE, f"d loss / d {name}: relative error {err:.2e}"


def test_forward_is_the_forward_kernel_tier():
    """Without autograd, the same numbers as torch_chunk.py (the inference CPU tier), to fp32 rounding."""
    x = {n: t.detach() for n, t in inputs(5).items()}
    with torch.no_grad():
        a, fa = under_test(x, CU_SEQLENS)
        b, fb = under_test(x, CU_SEQLENS, run=chunk_kda_torch)
    assert (a - b).abs().max() < 1e-6 and (fa - fb).abs().max() < 1e-6


def test_a_wrong_decay_is_caught():
    """The comparison can fail: the truth with every log-decay shifted by one token breaks the bound on A_log."""
    x = inputs(0)
    x64 = {n: t.detach().double().requires_grad_() for n, t in x.items()}
    out64, final64 = truth64(x64, CU_SEQLENS)
    want = grads(x64, out64, final64)
    shifted = dict(x, g=torch.cat([x["g"][:, :1], x["g"][:, :-1]], 1))
    out, final = under_test(shifted, CU_SEQLENS)
    got = grads(x, out, final)
    err = float((got["A_log"].double() - want["A_log"]).abs().max() / want["A_log"].abs().max())
    assert err > 1e-2


def test_batched_sequences_without_cu_seqlens():
    """B = 2 rows of 70 tokens (no packing) give the same gradients as packing those rows."""
    gen = torch.Generator().manual_seed(9)
    shapes = {"q": (2, 70, H, K), "k": (2, 70, H, K), "v": (2, 70, H, V), "g": (2, 70, H, K), "beta": (2, 70, H)}
    x = {n: torch.randn(*s, generator=gen).requires_grad_() for n, s in shapes.items()}
    A_log, dt_bias = torch.randn(H, generator=gen), torch.randn(H * K, generator=gen)

    def run(q, k, v, g, beta, cu):
        return chunk_kda_autograd(q, k, v, g, beta, A_log, dt_bias, "safe", LOWER_BOUND, None, None, False, cu,
                                  True, True)[0]  # fmt: skip

    batched = run(*x.values(), None)
    packed = run(*(t.reshape(1, 140, *t.shape[2:]) for t in x.values()), torch.tensor([0, 70, 140]))
    assert (batched.reshape(1, 140, H, V) - packed).abs().max() < 1e-6
    gb = torch.autograd.grad(batched.pow(2).sum(), list(x.values()))
    gp = torch.autograd.grad(packed.pow(2).sum(), list(x.values()))
    for a, b in zip(gb, gp):
        assert (a - b).abs().max() < 1e-5
