"""KDA against a peer nobody here wrote: fla (fla-core 0.6.0), run in a subprocess: its naive recurrence and gates,
and its Triton kernels on the test device: fused_recurrent_kda everywhere (in the interpreter on the CPU), chunk_kda
on a GPU only (its chunk kernels do not run in the interpreter: fla's autotuner needs a driver, and its kernels use
tensor methods the interpreter lacks).

fla must not be importable in this process (transformers would then try its GPU kernels), so it lives in its own
directory and runs with PYTHONPATH pointing there; tensors travel through a safetensors file. `.ci/setup` installs
it (pip install --no-deps --target <venv>/peers/fla fla-core==0.6.0 einops); on a GPU machine
benchmarks/gpu_check.sh installs it from a wheel and sets DAYONE_FLA_PEER.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from dayone.core.numerics import assert_close
from dayone.kernels.kda import chunk_kda
from safetensors.torch import load_file, save_file

FLA_DIR = Path(os.environ.get("DAYONE_FLA_PEER", Path(sys.prefix) / "peers" / "fla"))
H, K, V = 2, 32, 16
LOWER_BOUND = -5.0
# fla's kernels run per device, each judged by the row its arithmetic earns: fused_recurrent_kda is elementwise fp32
# like the naive form; chunk_kda multiplies in tensor cores (TF32 for fp32 inputs, as fla's own tests allow for).
FLA_KERNELS = {"cpu": ("fused_recurrent_kda",), "cuda": ("fused_recurrent_kda", "chunk_kda")}
FLA_KERNEL_TOLERANCE = {"fused_recurrent_kda": "fp32_oracle", "chunk_kda": "bf16_kernel"}

# Runs inside the peer process. fla's l2norm is a Triton kernel that needs a GPU, so the peer script normalises with
# fla's convention (x / sqrt(sum(x^2) + 1e-6)); the gates and the recurrences are fla's own.
PEER_SCRIPT = """
import sys
import torch
from safetensors.torch import load_file, save_file
from fla.ops.kda.gate import naive_kda_gate, naive_kda_lowerbound_gate
from fla.ops.kda.naive import naive_chunk_kda, naive_recurrent_kda

x = load_file(sys.argv[1])
norm = lambda t: t / torch.sqrt((t * t).sum(-1, keepdim=True) + 1e-6)
q, k = norm(x["q"]), norm(x["k"])
beta = x["beta"].sigmoid()
out = {}
for gate in ("plain", "safe"):
    if gate == "plain":
        g = naive_kda_gate(x["g"], x["A_log"], x["dt_bias"])
    else:
        g = naive_kda_lowerbound_gate(x["g"], x["A_log"], x["dt_bias"], lower_bound=float(x["lower_bound"]))
    bounds = x["cu_seqlens"].tolist()
    os, ss = [], []
    for n in range(len(bounds) - 1):
        s = slice(bounds[n], bounds[n + 1])
        o, st = naive_recurrent_kda(q[:, s], k[:, s], x["v"][:, s], g[:, s], beta[:, s],
                                    initial_state=x["h0"][n:n + 1], output_final_state=True)
        os.append(o)
        ss.append(st)
    out[f"o_{gate}"], out[f"state_{gate}"] = torch.cat(os, 1), torch.cat(ss)
    # fla's chunked naive form needs T % 64 == 0: the first 64 tokens as one sequence from h0[0].
    o, st = naive_chunk_kda(q[:, :64], k[:, :64], x["v"][:, :64], g[:, :64], beta[:, :64],
                            initial_state=x["h0"][:1], output_final_state=True)
    out[f"chunk_o_{gate}"], out[f"chunk_state_{gate}"] = o, st

# fla's Triton kernels on the device (argv[3]), named in argv[4:], over the same packed sequences from h0.
device, kernels = sys.argv[3], sys.argv[4:]
if kernels:
    from fla.ops.kda import chunk_kda, fused_recurrent_kda

    on = lambda t: t.to(device)
    args = [on(x[n]) for n in ("q", "k", "v", "g", "beta")]
    for gate in ("plain", "safe"):
        kw = dict(A_log=on(x["A_log"]), dt_bias=on(x["dt_bias"]), output_final_state=True,
                  cu_seqlens=on(x["cu_seqlens"]), use_qk_l2norm_in_kernel=True, use_gate_in_kernel=True,
                  use_beta_sigmoid_in_kernel=True)
        if gate == "safe":
            kw["lower_bound"] = float(x["lower_bound"])
        for name in kernels:
            if name == "chunk_kda":
                o, st = chunk_kda(*args, initial_state=on(x["h0"]).clone(), safe_gate=gate == "safe", **kw)
            else:
                o, st = fused_recurrent_kda(*args, initial_state=on(x["h0"]).clone(), **kw)
            out[f"{name}_o_{gate}"], out[f"{name}_state_{gate}"] = o.float().cpu(), st.float().cpu()
save_file({n: t.contiguous() for n, t in out.items()}, sys.argv[2])
"""


@pytest.fixture(scope="module")
def peer(tmp_path_factory, device):
    if not (FLA_DIR / "fla" / "ops" / "kda" / "naive.py").exists():
        pytest.fail(
            f"fla peer not installed at {FLA_DIR}; install it with: pip install --no-deps --target {FLA_DIR} "
            "fla-core==0.6.0 einops  (bash .ci/setup does; or set DAYONE_FLA_PEER)"
        )
    gen = torch.Generator().manual_seed(7)
    T = 70
    x = {
        "q": torch.randn(1, T, H, K, generator=gen),
        "k": torch.randn(1, T, H, K, generator=gen),
        "v": torch.randn(1, T, H, V, generator=gen),
        "g": torch.randn(1, T, H, K, generator=gen),
        "beta": torch.randn(1, T, H, generator=gen),
        "A_log": torch.randn(H, generator=gen) * 0.5,
        "dt_bias": torch.randn(H * K, generator=gen),
        "h0": torch.randn(3, H, K, V, generator=gen),
        "cu_seqlens": torch.tensor([0, 1, 67, 70]),
        "lower_bound": torch.tensor(LOWER_BOUND),
    }
    tmp = tmp_path_factory.mktemp("fla")
    save_file(x, tmp / "in.safetensors")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    if device == "cpu":
        env["TRITON_INTERPRET"] = "1"  # fla's fused_recurrent_kda in the interpreter
    env["PYTHONPATH"] = str(FLA_DIR)
    files = [str(tmp / "in.safetensors"), str(tmp / "out.safetensors")]
    run = subprocess.run(
        [sys.executable, "-P", "-c", PEER_SCRIPT, *files, device, *FLA_KERNELS[device]],
        env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert run.returncode == 0, f"fla peer failed:\n{run.stderr[-3000:]}"
    return x, load_file(tmp / "out.safetensors")


@pytest.mark.parametrize("backend", ["torch", "triton"])
@pytest.mark.parametrize("gate", ["plain", "safe"])
def test_chunk_kda_matches_fla(peer, device, backend, gate):
    x, want = peer
    assert "fla" not in sys.modules, "fla must stay out of the test process"
    x = {n: t.to(device) for n, t in x.items()}
    args = {n: x[n] for n in ("q", "k", "v", "g", "beta", "A_log", "dt_bias")}
    o, ht = chunk_kda(
        **args, gate=gate, lower_bound=LOWER_BOUND, initial_state=x["h0"], cu_seqlens=x["cu_seqlens"], backend=backend
    )
    assert_close(o, want[f"o_{gate}"], "fp32_oracle", what=f"o vs fla naive_recurrent_kda ({gate})")
    assert_close(ht, want[f"state_{gate}"], "fp32_oracle", what=f"final state vs fla ({gate})")
    for name in FLA_KERNELS[device]:
        row = FLA_KERNEL_TOLERANCE[name]
        assert_close(o, want[f"{name}_o_{gate}"], row, what=f"o vs fla {name} on {device} ({gate})")
        assert_close(ht, want[f"{name}_state_{gate}"], row, what=f"final state vs fla {name} on {device} ({gate})")

    first = {n: t[:, :64] if t.dim() > 2 else t for n, t in args.items()}
    o, ht = chunk_kda(**first, gate=gate, lower_bound=LOWER_BOUND, initial_state=x["h0"][:1], backend=backend)
    assert_close(o, want[f"chunk_o_{gate}"], "fp32_oracle", what=f"o vs fla naive_chunk_kda ({gate})")
    assert_close(ht, want[f"chunk_state_{gate}"], "fp32_oracle", what=f"final state vs fla chunk ({gate})")
