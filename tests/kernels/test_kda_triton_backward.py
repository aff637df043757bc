"""The Triton chunked KDA under autograd (`chunk_kda_triton_autograd`: chunk.py forward; chunk_backward.py and
chunk_backward_intra.py backward) in the interpreter, against autograd of the token-by-token recurrence in fp64,
with K3's safe gate and its output gate (per-head RMSNorm times sigmoid(gate)).

The fp64 truth is the preprocessing written from the formulas and `reference.recurrence`, the readable per-token
loop, run in fp64. The path under test computes in fp32, so each gradient is compared per tensor as max |error| /
max |truth| within GRAD_TOLERANCE: measured 1.2e-7 to 9.8e-7 per tensor at these shapes (the torch chunked path has
1e-7 to 4e-6); a wrong term is far above it (the chunk decay's gradient dropped from the backward kernel: 0.40 on g,
0.13 on dt_bias, 3.4e-2 on A_log).
Shapes: packed sequences of 1, 149 (three chunks, a ragged tail of 21) and 10 tokens and an empty one, each from
its own initial state, at K = V = 16; and a non-power-of-two pair, K = 48 (tile 64, three channel blocks of the
in-chunk backward; 96 takes twice the interpreter's time) with V = 80 (three V blocks of 32, the last hanging over V), on 1, 69 and 5 tokens, so the
padding and the per-block partial sums are exercised.
"""

import json
import os
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F
from dayone.kernels.kda import autograd as triton_autograd
from dayone.kernels.kda.autograd import chunk_kda_triton_autograd
from dayone.kernels.kda.torch_chunk_autograd import chunk_kda_autograd
from test_kda_autograd import truth64

H = 2
GRAD_TOLERANCE = 1e-5  # max |grad - grad64| / max |grad64|, per tensor
OUT_TOLERANCE = 1e-5  # max |out - out64| (outputs and final states are O(1))
# bf16 q, k, v, g, beta: o is rounded to bf16 (the gated output measured 2.3e-3 off the truth) and so are the
# gradients of those five (all gradients measured 1.9e-3 to 6.5e-3 relative); bf16 carries 8 mantissa bits (3.9e-3)
BF16_OUT_TOLERANCE, BF16_GRAD_TOLERANCE = 1e-2, 2e-2
LOWER_BOUND = -5.0
NORM_EPS = 1e-5
CU_SEQLENS = [0, 1, 150, 160, 160]
SHORT_CU_SEQLENS = [0, 1, 70, 75, 75]  # for the wide heads: 69 = 64 + 5 tokens crosses a chunk, in half the time


# AOT needs TRITON_INTERPRET unset (tests/conftest.py sets it): a subprocess, as in tests/kernels/test_aot.py.
AOT_SCRIPT = """
import json, sys
from dayone.compile_stage import kernel_dims
from dayone.kernels.aot import compile_specializations
from dayone.kernels.kda.aot import training_specializations
from dayone.spec.registry import load_spec
rows = compile_specializations(training_specializations(kernel_dims(load_spec("kimi-k3"))), cache_dir=sys.argv[1])
print(json.dumps([r.as_dict() for r in rows]))
"""


def inputs(K, V, seed=0, cu=CU_SEQLENS):
    T = cu[-1]
    gen = torch.Generator().manual_seed(seed)

    def randn(*shape, s=1.0):
        return (torch.randn(*shape, generator=gen, dtype=torch.float64) * s).float().requires_grad_()

    return {
        "q": randn(1, T, H, K), "k": randn(1, T, H, K), "v": randn(1, T, H, V), "g": randn(1, T, H, K),
        "beta": randn(1, T, H), "A_log": randn(H, s=0.5), "dt_bias": randn(H * K),
        "gate": randn(1, T, H, V), "weight": randn(V, s=0.3), "h0": randn(len(cu) - 1, H, K, V, s=0.1),
    }  # fmt: skip


def under_test(x, cu):
    V = x["v"].shape[-1]
    o, final = chunk_kda_triton_autograd(
        x["q"], x["k"], x["v"], x["g"], x["beta"], x["A_log"], x["dt_bias"], "safe", LOWER_BOUND, None, x["h0"], True,
        torch.tensor(cu, device=x["q"].device), True, True,
    )  # fmt: skip
    return F.rms_norm(o.float(), (V,), x["weight"], NORM_EPS) * torch.sigmoid(x["gate"]), final


def grads(x, out, final, seed=3):
    """Gradients of a loss that weighs every output and state element differently (a sum would hide a permutation)."""
    gen = torch.Generator().manual_seed(seed)
    wo = torch.randn(out.shape, generator=gen, dtype=torch.float64)
    ws = torch.randn(final.shape, generator=gen, dtype=torch.float64)
    loss = (out.double() * wo).sum() + (final.double() * ws).sum()
    return dict(zip(x, torch.autograd.grad(loss, list(x.values()))))


def relative_errors(x, device, cu=CU_SEQLENS, out_tolerance=OUT_TOLERANCE) -> dict[str, float]:
    """Per tensor max |grad - grad64| / max |grad64|, after checking the forward against the truth. x is made on the
    CPU, the truth computed there; the path under test runs on `device` (the kernels' test device)."""
    x64 = {n: t.detach().double().requires_grad_() for n, t in x.items()}
    out64, final64 = truth64(x64, cu)
    want = grads(x64, out64, final64)
    xd = {n: t.detach().to(device).requires_grad_() for n, t in x.items()}
    out, final = (t.cpu() for t in under_test(xd, cu))
    assert (out.double() - out64).abs().max() < out_tolerance
    assert (final.double() - final64).abs().max() < OUT_TOLERANCE
    got = {n: t.cpu() for n, t in grads(xd, out, final).items()}
    assert all(got[n].dtype == x[n].dtype for n in x)
    return {n: float((got[n].double() - want[n]).abs().max() / want[n].abs().max()) for n in x}


@pytest.mark.parametrize("K, V, cu", [(16, 16, CU_SEQLENS), (48, 80, SHORT_CU_SEQLENS)])
def test_gradients_match_fp64_recurrence(K, V, cu, device):
    errors = relative_errors(inputs(K, V, cu=cu), device, cu)
    assert max(errors.values()) < GRAD_TOLERANCE, errors


def test_bf16_inputs(device):
    """The Megatron model's activations in bf16: o and the gradients of the bf16 inputs come back in bf16, near the
    fp64 truth of the same (rounded) inputs."""
    bf16 = ("q", "k", "v", "g", "beta")
    x = {n: (t.detach().bfloat16() if n in bf16 else t.detach()).requires_grad_() for n, t in inputs(16, 16).items()}
    errors = relative_errors(x, device, out_tolerance=BF16_OUT_TOLERANCE)
    assert max(errors.values()) < BF16_GRAD_TOLERANCE, errors


def test_a_planted_wrong_gradient_is_caught(monkeypatch, device):
    """The comparison can fail: the backward kernel's gradient of the chunk decay dropped (as if the state's decay
    over a chunk were a constant) breaks the bound on the gate's inputs."""
    real = triton_autograd.chunk_backward_triton

    def without_chunk_decay_gradient(*args, **kwargs):
        dqg, dkg, dw, du, dAqk, dgl, dh0 = real(*args, **kwargs)
        return dqg, dkg, dw, du, dAqk, torch.zeros_like(dgl), dh0

    monkeypatch.setattr(triton_autograd, "chunk_backward_triton", without_chunk_decay_gradient)
    errors = relative_errors(inputs(16, 16), device)
    assert errors["A_log"] > 1e-2 and errors["g"] > 1e-2, errors


def test_megatron_call_shape_matches_the_cpu_training_path(device):
    """As the Megatron layer calls it (B = 2 rows, no packing, no initial state, no final state): the gradients of
    the CPU training path (torch_chunk_autograd), to fp32 rounding."""
    gen = torch.Generator().manual_seed(9)
    K = V = 16
    shapes = {"q": (2, 70, H, K), "k": (2, 70, H, K), "v": (2, 70, H, V), "g": (2, 70, H, K), "beta": (2, 70, H),
              "A_log": (H,), "dt_bias": (H * K,)}  # fmt: skip
    x = {n: torch.randn(*s, generator=gen).requires_grad_() for n, s in shapes.items()}
    w = torch.randn(2, 70, H, V, generator=gen)
    results = []
    for run, where in ((chunk_kda_triton_autograd, device), (chunk_kda_autograd, "cpu")):
        xd = {n: t.detach().to(where).requires_grad_() for n, t in x.items()}
        o, final = run(*xd.values(), "safe", LOWER_BOUND, None, None, False, None, True, True)
        assert final is None
        dx = torch.autograd.grad((o * w.to(where)).sum(), list(xd.values()))
        results.append((o.cpu(), [t.cpu() for t in dx]))
    (o, got), (o_cpu, want) = results
    assert (o - o_cpu).abs().max() < 1e-5
    for name, a, b in zip(x, got, want):
        assert float((a - b).abs().max() / b.abs().max()) < GRAD_TOLERANCE, name


@pytest.mark.slow  # 20-30 s: twelve ptxas runs
def test_k3_backward_cubins_build_for_sm90_and_sm100_within_their_spill_figures(tmp_path):
    """K3's backward instances (K = V = 128, bf16 model: TF32 dots) compile to cubins for sm_90 and sm_100 without a
    GPU, within shared memory and each instance's known spill figure (compile_specializations refuses otherwise)."""
    env = {k: v for k, v in os.environ.items() if k not in ("TRITON_INTERPRET", "TRITON_DEFAULT_FP_FUSION")}
    run = subprocess.run([sys.executable, "-P", "-c", AOT_SCRIPT, str(tmp_path)], env=env, capture_output=True, text=True,
                         timeout=600, check=False)  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    rows = json.loads(run.stdout.strip().splitlines()[-1])
    kernels = {"kda.chunk_states", "kda.chunk_states.h0", "kda.chunk_backward", "kda.chunk_backward.ht"}
    kernels |= {"kda.chunk_intra_backward", "kda.chunk_wy_backward"}
    assert {(r["kernel"], r["arch"]) for r in rows} == {(k, a) for k in kernels for a in ("sm_90", "sm_100")}
    for r in rows:
        assert "K=128 " in r["config"] and "IEEE=False" in r["config"]
        assert (tmp_path / r["cubin"]).stat().st_size > 0 and 0 < r["registers"] <= 255
        assert 0 < r["shared_bytes"] <= 227 * 1024
