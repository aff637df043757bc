"""KDA kernels: speed against fla and against the HBM limit on a GPU; the AOT resource table on any machine.

On a GPU (fla-core installed):
  prefill: our chunk_kda vs fla's chunk_kda at B=1, T=8192, H=96, K=V=128, bf16, safe gate, all fused in-kernel;
  decode:  our kda_decode vs fla's fused_recurrent_kda at batch 64, and vs the time to move the state once each way
           through HBM at 4.8 TB/s (H200), the floor for a memory-bound step.
On the CPU: the compile table for Kimi K3's KDA specialisations (sm_90, sm_100) and small torch-tier timings.
Run as a script: `python benchmarks/kernels_kda.py` (TRITON_INTERPRET must be unset for the compile table).
"""

from __future__ import annotations

import os
import tempfile
import time

import torch
from dayone.kernels import gated_rmsnorm, kda, short_conv
from dayone.kernels.specialization import KernelDims

HBM_BYTES_PER_S = 4.8e12
K3 = KernelDims(hidden_size=7168, kda_num_heads=96, kda_head_dim=128, conv_kernel_size=4)


def inputs(B, T, H, K, V, device, dtype=torch.bfloat16):
    rnd = lambda *s: torch.randn(*s, device=device, dtype=dtype)
    return {
        "q": rnd(B, T, H, K), "k": rnd(B, T, H, K), "v": rnd(B, T, H, V), "g": rnd(B, T, H, K), "beta": rnd(B, T, H),
        "A_log": torch.randn(H, device=device), "dt_bias": torch.randn(H * K, device=device),
    }  # fmt: skip


def bench_gpu() -> None:
    from triton.testing import do_bench

    H, K, V = 96, 128, 128
    x = inputs(1, 8192, H, K, V, "cuda")
    h0 = torch.randn(1, H, K, V, device="cuda")
    ours = do_bench(lambda: kda.chunk_kda(**x, gate="safe", initial_state=h0))
    print(f"prefill T=8192 H=96 K=V=128 bf16: ours {ours:.3f} ms")
    try:
        from fla.ops.kda import chunk_kda as fla_chunk_kda
        from fla.ops.kda import fused_recurrent_kda
    except ImportError:
        print("fla not importable: no peer ratios (pip install fla-core==0.6.0)")
        fla_chunk_kda = fused_recurrent_kda = None
    fla_kw = {"use_qk_l2norm_in_kernel": True, "use_gate_in_kernel": True, "use_beta_sigmoid_in_kernel": True,
                  "safe_gate": True, "lower_bound": -5.0, "output_final_state": True}  # fmt: skip
    if fla_chunk_kda is not None:
        theirs = do_bench(lambda: fla_chunk_kda(**x, initial_state=h0, **fla_kw))
        print(f"  fla chunk_kda {theirs:.3f} ms   ours/fla = {ours / theirs:.2f}")

    N = 64
    d = inputs(N, 1, H, K, V, "cuda")  # decode takes [N, T=1, H, K]; fla reads the same as B=N, T=1
    pool = torch.randn(N, H, K, V, device="cuda")
    slots = torch.arange(N, device="cuda", dtype=torch.int32)
    ours = do_bench(lambda: kda.kda_decode(**d, state_pool=pool, slots=slots, gate="safe"))
    floor = 2 * pool.numel() * 4 / HBM_BYTES_PER_S * 1e3
    print(f"decode batch 64: ours {ours * 1e3:.1f} us, HBM floor {floor * 1e3:.1f} us, ours/floor = {ours / floor:.2f}")
    if fused_recurrent_kda is not None:
        fla_kw.pop("safe_gate")
        theirs = do_bench(lambda: fused_recurrent_kda(**d, initial_state=pool, **fla_kw))
        print(f"  fla fused_recurrent_kda {theirs * 1e3:.1f} us   ours/fla = {ours / theirs:.2f}")


def compile_table() -> None:
    if os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
        print("TRITON_INTERPRET is set: skipping the AOT compile table")
        return
    from dayone.kernels.aot import compile_specializations, format_table

    specs = kda.specializations(K3) + short_conv.specializations(K3) + gated_rmsnorm.specializations(K3)
    with tempfile.TemporaryDirectory() as cache:
        start = time.perf_counter()
        table = compile_specializations(specs, ("sm_90", "sm_100"), cache)
        print(f"AOT, Kimi K3 KDA specialisations ({time.perf_counter() - start:.1f} s):")
        print(format_table(table))


def bench_cpu() -> None:
    H, K, V = 4, 64, 64
    x = inputs(1, 512, H, K, V, "cpu", torch.float32)
    for name, fn in (
        ("chunk_kda torch tier", lambda: kda.chunk_kda(**x, gate="safe")),
        ("reference recurrence", lambda: kda.reference.kda_reference(**x, gate="safe")),
    ):
        fn()
        start = time.perf_counter()
        fn()
        print(f"{name:<22} T=512 H={H} K=V={K}: {(time.perf_counter() - start) * 1e3:8.1f} ms")


if __name__ == "__main__":
    if torch.cuda.is_available():
        bench_gpu()
    compile_table()
    bench_cpu()
