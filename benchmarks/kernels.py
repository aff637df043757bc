"""Kernel benchmarks, the one entry point: each kernel against a peer and against the hardware, in the same run.

    python benchmarks/kernels.py [--hbm-tbps 4.8] [--peak-tflops 989] [--skip-compile] [--quick] [--threads N]
                                 [--json FILE] [--dry-run]

On a GPU (fla-core must be importable there: the run stops, exit code 2, if it is not):
  kda prefill   chunk_kda vs fla's chunk_kda at B=1, T=8192, K3's KDA heads and head dim (96, K=V=128), bf16, gate,
                beta sigmoid and q/k L2 norm in-kernel; vs the HBM floor (inputs read and output written once) and
                the dense bf16 peak (the chunked form's matmul FLOPs). Goal: at least fla's speed.
  kda decode    kda_decode at batch 64 vs fla's fused_recurrent_kda (T=1) and vs the HBM floor of moving the fp32
                state once each way (goal: >= 70% of HBM bandwidth).
  mla decode    absorbed MLA over a paged latent cache, batch 64, 8k context, K3 dims: vs torch SDPA on the expanded
                per-head keys/values, and vs reading the latent cache once at the HBM limit (goal: >= 70%).
  mxfp4 matvec  batch 1, one expert's gate projection and the 16 experts of one token: vs dequantize-then-matmul
                (goal: >= 2x) and vs reading the packed bytes (4.25 bits per weight) once.
  Before timing, each kernel's output is compared (dayone.core.numerics) with its peer's, or for MLA with the torch path
  (SDPA on random expanded keys is a different computation), so a ratio is never taken against a wrong kernel.
  --json FILE writes every check and every figure beside its goal (benchmarks/gpu_check.py reads it); the exit code
  is 1 when a check fails.
--dry-run: the GPU rows' code on the CPU, Triton in the interpreter, at tiny shapes, so that it cannot rot in CI
  (the figures mean nothing there). fla's chunk kernels do not run in the interpreter: the prefill peer call is
  bound to chunk_kda's signature (its arguments checked) and run through fused_recurrent_kda, the same recurrence.
Everywhere but --dry-run: the AOT compile table (sm_90, sm_100) of both shipped specs through the compile stage,
cached in build/kernels/<spec>/cubin as `integrate compile` does. Without a GPU: the CPU fast-tier torch
counterparts against their token-by-token references, on this machine's cores.
Model dims (heads, head dims, latent and expert widths, gate) come from the shipped specs through the compile stage
(`kernel_dims`); workload sizes (T, batch, context) are the ones issues 4 and 5 name.
"""

from __future__ import annotations

import os
import sys

# Python puts this script's folder first on the import path, and benchmarks/ holds scripts named like modules
# (inspect.py shadows the standard library's, kernels.py PyPI's `kernels`): take it off before importing anything.
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != os.path.dirname(os.path.abspath(__file__))]

import argparse
import inspect
import json
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

# The interpreter replaces @triton.jit functions at import, leaving nothing to compile: unset it before any import,
# unless this is the dry run, which runs the GPU rows in it.
DRY_RUN = "--dry-run" in sys.argv[1:]
if DRY_RUN:
    os.environ["TRITON_INTERPRET"] = "1"
else:
    os.environ.pop("TRITON_INTERPRET", None)

import torch
from dayone.compile_stage import kernel_dims, specializations_for
from dayone.core.numerics import compare
from dayone.kernels.specialization import KernelDims
from dayone.spec.registry import load_spec

ROOT = Path(__file__).resolve().parents[1]
SPECS = ("kimi-k3", "kimi-linear-48b-a3b")
LOWER_BOUND = -5.0  # K3's safe gate (spec: kda.gate.lower_bound)
FLA_HINT = "pip install fla-core==0.6.0 einops (the KDA peer; see .ci/setup)"


@dataclass(frozen=True)
class Workload:
    """The sizes the GPU rows run at: the issues' workloads, or tiny ones for the dry run."""

    prefill_tokens: int = 8192
    decode_batch: int = 64
    mla_batch: int = 64
    mla_context: int = 8192


DRY_WORKLOAD = Workload(prefill_tokens=80, decode_batch=3, mla_batch=2, mla_context=40)


def dry_dims(dims: KernelDims) -> KernelDims:
    """K3's dims shrunk for the interpreter: every kernel keeps its structure (gate, tiles, groups), not its width."""
    return replace(
        dims, kda_num_heads=2, kda_head_dim=32, mla_num_heads=4, kv_lora_rank=32, qk_nope_head_dim=16,
        qk_rope_head_dim=16, v_head_dim=16, moe_hidden_size=128, moe_intermediate_size=64, experts_per_token=2,
    )  # fmt: skip


@dataclass
class Results:
    """What --json writes: each output check against its peer and each figure beside its goal."""

    device: str
    dry_run: bool
    checks: list[dict] = field(default_factory=list)
    figures: list[dict] = field(default_factory=list)
    timings: list[dict] = field(default_factory=list)

    def check(self, what: str, ours: torch.Tensor, peer: torch.Tensor, tolerance: str = "bf16_kernel") -> None:
        result = compare(ours.float(), peer.float(), tolerance)
        print(f"  check {what:<34} {result.describe()}", flush=True)
        self.checks.append({"what": what, **result.as_dict()})

    def figure(self, name: str, value: float, unit: str, goal: float | None = None, note: str = "") -> None:
        """A ratio: higher is better; `goal` is the least value the issue asks for (None: reported only)."""
        met = None if goal is None else value >= goal
        self.figures.append({"name": name, "value": value, "unit": unit, "goal": goal, "met": met, "note": note})

    @property
    def passed(self) -> bool:
        return all(c["passed"] for c in self.checks)

    def write(self, path: Path) -> None:
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(asdict(self), indent=1) + "\n")
        tmp.replace(path)


def bench(fn, device: str, repeats: int = 3) -> float:
    """Seconds per call: triton's do_bench (median) on a GPU, the best of `repeats` on the CPU after one warm-up."""
    if device == "cuda":
        from triton.testing import do_bench

        return do_bench(fn, warmup=25, rep=100) * 1e-3
    fn()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def row(name: str, shape: str, ours: float, peer_name: str = "", peer: float | None = None, extra: str = "",
        results: Results | None = None) -> None:  # fmt: skip
    line = f"{name:<22} {shape:<34} {ours * 1e3:10.3f} ms"
    if peer is not None:
        line += f"   {peer_name} {peer * 1e3:10.3f} ms   speedup x{peer / ours:6.2f}"
    print(line + (f"   {extra}" if extra else ""), flush=True)
    if results is not None:
        results.timings.append({"name": name, "shape": shape, "ms": ours * 1e3, "peer": peer_name,
                                "peer_ms": None if peer is None else peer * 1e3})  # fmt: skip


def kda_inputs(N: int, T: int, H: int, K: int, V: int, device: str, dtype: torch.dtype = torch.bfloat16) -> dict:
    gen = torch.Generator(device=device).manual_seed(0)

    def randn(*shape, dt=dtype):
        return torch.randn(*shape, generator=gen, device=device, dtype=dt)

    return {
        "q": randn(N, T, H, K), "k": randn(N, T, H, K), "v": randn(N, T, H, V), "g": randn(N, T, H, K),
        "beta": randn(N, T, H), "A_log": randn(H, dt=torch.float32) * 0.5, "dt_bias": randn(H * K, dt=torch.float32),
    }  # fmt: skip


# --- GPU rows (also the dry run's, on the CPU) ---------------------------------------------------------------------
def require_fla():
    try:
        import fla.ops.kda as fla_kda
    except ImportError as err:
        print(f"benchmarks/kernels.py: fla is not importable on this GPU machine ({err}); {FLA_HINT}", file=sys.stderr)
        sys.exit(2)
    return fla_kda


def fla_gate_kwargs(gate: str) -> dict:
    """fla's switches for our in-kernel gate, beta and L2 norm (fla.ops.kda.chunk_kda / fused_recurrent_kda)."""
    kw = {"use_qk_l2norm_in_kernel": True, "use_gate_in_kernel": True, "use_beta_sigmoid_in_kernel": True}
    if gate == "safe":  # lower_bound * sigmoid(exp(A_log) * (g + dt_bias))
        kw["lower_bound"] = LOWER_BOUND
    return kw


def fla_prefill(fla_kda, device: str):
    """fla's chunk_kda; in the dry run (interpreter) the call is bound to its signature, then run recurrently."""
    if device == "cuda":
        return fla_kda.chunk_kda

    def checked(*args, safe_gate=False, **kwargs):
        inspect.signature(fla_kda.chunk_kda).bind(*args, safe_gate=safe_gate, **kwargs)
        return fla_kda.fused_recurrent_kda(*args, **kwargs)

    return checked


def gpu_kda(dims: KernelDims, work: Workload, hbm: float, peak: float, device: str, res: Results) -> None:
    from dayone.kernels import kda

    fla_kda = require_fla()
    repeats = 1 if res.dry_run else 3
    H, K = dims.kda_num_heads, dims.kda_head_dim
    V, T, gate = K, work.prefill_tokens, dims.kda_gate
    x = kda_inputs(1, T, H, K, V, device)
    h0 = torch.randn(1, H, K, V, device=device)
    fla_kw = fla_gate_kwargs(gate)
    fla_chunk = fla_prefill(fla_kda, device)
    ours = lambda: kda.chunk_kda(**x, gate=gate, lower_bound=LOWER_BOUND, initial_state=h0, backend="triton")
    theirs = lambda: fla_chunk(
        x["q"], x["k"], x["v"], x["g"], x["beta"], A_log=x["A_log"], dt_bias=x["dt_bias"], initial_state=h0.clone(),
        output_final_state=True, safe_gate=gate == "safe", **fla_kw,
    )  # fmt: skip
    (o, ht), (fo, fht) = ours(), theirs()
    res.check("kda prefill o vs fla", o, fo)
    res.check("kda prefill final state vs fla", ht, fht)
    t_ours, t_fla = bench(ours, device, repeats), bench(theirs, device, repeats)
    io_bytes = sum(x[n].numel() * x[n].element_size() for n in ("q", "k", "v", "g", "beta")) + o.numel() * 2
    flops = 2 * T * H * (32 * (3 * K + 2 * V) + 3 * K * V)  # per chunk of 64: A, the WY solve products, 3 state matmuls
    row(
        "kda prefill", f"B=1 T={T} H={H} K=V={K} bf16 {gate}", t_ours, "fla chunk_kda", t_fla,
        f"HBM floor x{io_bytes / hbm / t_ours:.2f}  {flops / t_ours / 1e12:6.1f} TFLOP/s = x{flops / peak / t_ours:.3f} "
        "of peak", res,
    )  # fmt: skip
    res.figure("kda prefill: fla chunk_kda time / ours", t_fla / t_ours, "x", 1.0, f"B=1 T={T} H={H} K=V={K} bf16")
    res.figure("kda prefill: HBM floor time / ours", io_bytes / hbm / t_ours, "of HBM")
    res.figure("kda prefill: bf16 peak fraction", flops / peak / t_ours, "of peak")

    N = work.decode_batch
    d = kda_inputs(N, 1, H, K, V, device)  # decode [N, T=1, ...]; fla reads the same tensors as B=N, T=1
    pool = torch.randn(N, H, K, V, device=device)
    slots = torch.arange(N, device=device, dtype=torch.int32)
    start = pool.clone()
    o = kda.kda_decode(**d, state_pool=pool, slots=slots, gate=gate, lower_bound=LOWER_BOUND, backend="triton")
    fo, fht = fla_kda.fused_recurrent_kda(
        d["q"], d["k"], d["v"], d["g"], d["beta"], A_log=d["A_log"], dt_bias=d["dt_bias"], initial_state=start.clone(),
        output_final_state=True, **fla_kw,
    )  # fmt: skip
    res.check("kda decode o vs fla", o, fo)
    res.check("kda decode state vs fla", pool, fht)
    ours = lambda: kda.kda_decode(
        **d, state_pool=pool, slots=slots, gate=gate, lower_bound=LOWER_BOUND, backend="triton"
    )  # fmt: skip
    theirs = lambda: fla_kda.fused_recurrent_kda(
        d["q"], d["k"], d["v"], d["g"], d["beta"], A_log=d["A_log"], dt_bias=d["dt_bias"], initial_state=start,
        output_final_state=True, **fla_kw,
    )  # fmt: skip
    t_ours, t_fla = bench(ours, device, repeats), bench(theirs, device, repeats)
    state_bytes = 2 * pool.numel() * pool.element_size()  # read once, written once
    row(
        "kda decode", f"batch={N} H={H} K=V={K} {gate}", t_ours, "fla fused_recurrent", t_fla,
        f"{state_bytes / t_ours / 1e12:5.2f} TB/s = x{state_bytes / hbm / t_ours:.2f} of HBM", res,
    )  # fmt: skip
    res.figure("kda decode: fraction of HBM bandwidth", state_bytes / hbm / t_ours, "of HBM", 0.7, f"batch={N}")
    res.figure("kda decode: fla fused_recurrent time / ours", t_fla / t_ours, "x")


def mla_inputs(dims: KernelDims, batch: int, context: int, heads: int, device: str, page_size: int = 64):
    """Absorbed queries, a shuffled page pool exactly filled by `batch` requests of `context` tokens, the table."""
    width = dims.kv_lora_rank + dims.qk_rope_head_dim
    pages = -(-context // page_size)
    cache = torch.randn(batch * pages, page_size, width, device=device, dtype=torch.bfloat16)
    table = torch.randperm(batch * pages, device=device).to(torch.int32).reshape(batch, pages)
    lens = torch.full((batch,), context, dtype=torch.int32, device=device)
    q = torch.randn(batch, heads, width, device=device, dtype=torch.bfloat16)
    return q, cache, table, lens


def gpu_mla(dims: KernelDims, work: Workload, hbm: float, device: str, res: Results) -> None:
    from dayone.kernels.mla_decode import mla_decode

    repeats = 1 if res.dry_run else 3
    batch, context = work.mla_batch, work.mla_context
    heads, nope, rope = dims.mla_num_heads, dims.qk_nope_head_dim, dims.qk_rope_head_dim
    scale = (nope + rope) ** -0.5
    q, cache, table, lens = mla_inputs(dims, batch, context, heads, device)
    ours = lambda: mla_decode(q, cache, table, lens, dims.kv_lora_rank, scale, backend="triton")
    res.check("mla decode vs its torch path", ours(), mla_decode(q, cache, table, lens, dims.kv_lora_rank, scale,
                                                                 backend="torch"))  # fmt: skip
    t_mla = bench(ours, device, repeats)
    # The non-absorbed peer: per-head keys [k_nope | k_rope] and values, expanded once outside the timing.
    k = torch.randn(batch, heads, context, nope + rope, device=device, dtype=torch.bfloat16)
    v = torch.randn(batch, heads, context, dims.v_head_dim, device=device, dtype=torch.bfloat16)
    q_full = torch.randn(batch, heads, 1, nope + rope, device=device, dtype=torch.bfloat16)
    sdpa = torch.nn.functional.scaled_dot_product_attention
    t_sdpa = bench(lambda: sdpa(q_full, k, v, scale=scale), device, repeats)
    cache_bytes = batch * context * cache.shape[-1] * cache.element_size()
    row(
        "mla decode", f"batch={batch} ctx={context} H={heads}", t_mla, "sdpa expanded", t_sdpa,
        f"{cache_bytes / t_mla / 1e12:5.2f} TB/s = x{cache_bytes / hbm / t_mla:.2f} of HBM", res,
    )  # fmt: skip
    res.figure("mla decode: fraction of HBM bandwidth", cache_bytes / hbm / t_mla, "of HBM", 0.7,
               f"batch={batch} ctx={context}")  # fmt: skip
    res.figure("mla decode: expanded sdpa time / ours", t_sdpa / t_mla, "x")


def gpu_mxfp4(dims: KernelDims, hbm: float, device: str, res: Results) -> None:
    for experts in (1, dims.experts_per_token):  # one expert's gate projection; the top-k of one token stacked
        rows = experts * dims.moe_intermediate_size
        gpu_mxfp4_matvec(rows, dims.moe_hidden_size, dims.mxfp4_group_size, hbm, device, res)


def gpu_mxfp4_matvec(rows: int, k_in: int, group: int, hbm: float, device: str, res: Results) -> None:
    from dayone.kernels.mxfp4 import dequantize_mxfp4, mxfp4_linear

    repeats = 1 if res.dry_run else 3
    packed = torch.randint(0, 256, (rows, k_in // 2), dtype=torch.uint8, device=device)
    scale = torch.randint(118, 130, (rows, k_in // group), dtype=torch.uint8, device=device)
    x = torch.randn(1, k_in, dtype=torch.bfloat16, device=device)
    ours = lambda: mxfp4_linear(x, packed, scale, backend="triton")
    dense = lambda: x @ dequantize_mxfp4(packed, scale, backend="triton").T
    res.check(f"mxfp4 [{rows} x {k_in}] vs dequant+matmul", ours(), dense())
    t_packed, t_dense = bench(ours, device, repeats), bench(dense, device, repeats)
    weight_bytes = packed.numel() + scale.numel()
    row(
        "mxfp4 matvec", f"batch=1 [{rows} x {k_in}]", t_packed, "dequant+matmul", t_dense,
        f"{weight_bytes / t_packed / 1e12:5.2f} TB/s = x{weight_bytes / hbm / t_packed:.2f} of HBM", res,
    )  # fmt: skip
    res.figure(f"mxfp4 matvec [{rows} x {k_in}]: dequant+matmul time / ours", t_dense / t_packed, "x", 2.0)
    res.figure(f"mxfp4 matvec [{rows} x {k_in}]: fraction of HBM bandwidth", weight_bytes / hbm / t_packed, "of HBM")


# --- compile table -------------------------------------------------------------------------------------------------
def compile_tables() -> None:
    from dayone.kernels.aot import compile_specializations, format_table

    for name in SPECS:
        specs = specializations_for(load_spec(name))
        start = time.perf_counter()
        table = compile_specializations(specs, ("sm_90", "sm_100"), ROOT / "build" / "kernels" / name / "cubin")
        hits = sum(r.cached for r in table)
        print(f"\nAOT {name}: {len(table)} builds ({hits} from cache) in {time.perf_counter() - start:.1f} s")
        print(format_table(table), flush=True)


# --- CPU -----------------------------------------------------------------------------------------------------------
def cpu_kda(quick: bool) -> None:
    from dayone.kernels import kda
    from dayone.kernels.kda.reference import kda_decode_reference, kda_reference

    shapes = [(512, 4, 64), (2048, 4, 64)] + ([] if quick else [(2048, 8, 128), (2048, 32, 128)])
    for T, H, K in shapes:
        x = kda_inputs(1, T, H, K, K, "cpu", torch.float32)
        t_ours = bench(lambda x=x: kda.chunk_kda(**x, gate="safe", backend="torch"), "cpu")
        start = time.perf_counter()
        ref = kda_reference(**x, gate="safe")  # pure Python over tokens: once is enough
        t_ref = time.perf_counter() - start
        ok = compare(kda.chunk_kda(**x, gate="safe", backend="torch")[0], ref[0], "fp32").passed
        row("kda chunk (torch)", f"T={T} H={H} K=V={K} fp32", t_ours, "reference", t_ref, f"fp32 match: {ok}")

    N, T, H, K = 16, 4, 8, 128
    x = kda_inputs(N, T, H, K, K, "cpu", torch.float32)
    pool = torch.randn(N, H, K, K)
    slots = torch.arange(N, dtype=torch.int32)
    inter = torch.zeros(N, T, H, K, K)
    t_ours = bench(lambda: kda.kda_decode(**x, state_pool=pool, slots=slots, gate="safe", intermediate_states=inter,
                                         backend="torch"), "cpu")  # fmt: skip
    start = time.perf_counter()
    kda_decode_reference(**x, state_pool=pool, slots=slots, gate="safe")
    row("kda verify (torch)", f"N={N} T={T} H={H} K=V={K} fp32", t_ours, "reference", time.perf_counter() - start)


def cpu_others() -> None:
    from dayone.kernels.gated_rmsnorm import gated_rmsnorm
    from dayone.kernels.gated_rmsnorm.reference import gated_rmsnorm_reference
    from dayone.kernels.mla_decode import mla_decode
    from dayone.kernels.mla_decode.reference import mla_decode_reference
    from dayone.kernels.mxfp4 import dequantize_mxfp4, mxfp4_linear
    from dayone.kernels.short_conv import short_conv, short_conv_update
    from dayone.kernels.short_conv.reference import short_conv_reference, short_conv_update_reference

    gen = torch.Generator().manual_seed(0)
    D, W = 3 * 8 * 128, 4  # q, k, v of 8 heads of 128
    x = torch.randn(1, 2048, D, generator=gen)
    weight = torch.randn(D, W, generator=gen)
    cu = torch.tensor([0, 700, 2048])
    t_ours = bench(lambda: short_conv(x, weight, cu_seqlens=cu, backend="torch"), "cpu")
    t_ref = bench(lambda: short_conv_reference(x, weight, cu), "cpu")
    row("short_conv (torch)", f"T=2048 D={D} 2 seqs", t_ours, "reference", t_ref)

    pool = torch.randn(64, D, W - 1, generator=gen)
    drafts = torch.randn(64, 4, D, generator=gen)
    slots = torch.arange(64)
    inter = torch.zeros(64, 4, D, W - 1)
    t_ours = bench(lambda: short_conv_update(drafts, weight, pool, slots, intermediate_states=inter, backend="torch"),
                   "cpu")  # fmt: skip
    t_ref = bench(lambda: short_conv_update_reference(drafts, weight, pool, slots), "cpu")
    row("short_conv verify", f"N=64 T=4 D={D}", t_ours, "reference", t_ref)

    h = torch.randn(2048, 8, 128, generator=gen)
    gate, w = torch.randn(2048, 8, 128, generator=gen), torch.randn(128, generator=gen)
    t_ours = bench(lambda: gated_rmsnorm(h, gate, w, backend="torch"), "cpu")
    row(
        "gated_rmsnorm (torch)",
        "T=2048 H=8 V=128",
        t_ours,
        "reference",
        bench(lambda: gated_rmsnorm_reference(h, gate, w), "cpu"),
    )

    dims = kernel_dims(load_spec("kimi-k3"))
    q, cache, table, lens = mla_inputs(dims, 4, 512, 8, "cpu")
    scale = (dims.qk_nope_head_dim + dims.qk_rope_head_dim) ** -0.5
    t_ours = bench(lambda: mla_decode(q, cache, table, lens, dims.kv_lora_rank, scale, backend="torch"), "cpu")
    t_ref = bench(lambda: mla_decode_reference(q, cache, table, lens, dims.kv_lora_rank, scale), "cpu")
    row("mla decode (torch)", "batch=4 ctx=512 H=8", t_ours, "reference", t_ref)

    packed = torch.randint(0, 256, (512, 256), dtype=torch.uint8, generator=gen)
    e8m0 = torch.randint(118, 130, (512, 16), dtype=torch.uint8, generator=gen)
    xb = torch.randn(1, 512, generator=gen).bfloat16()
    t_ours = bench(lambda: mxfp4_linear(xb, packed, e8m0, backend="torch"), "cpu")
    t_ref = bench(lambda: xb @ dequantize_mxfp4(packed, e8m0, backend="torch").T, "cpu")
    row("mxfp4 matvec (torch)", "batch=1 [512 x 512]", t_ours, "dequant+matmul", t_ref)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hbm-tbps", type=float, default=4.8, help="HBM bandwidth limit in TB/s (H200: 4.8)")
    parser.add_argument("--peak-tflops", type=float, default=989.0, help="dense bf16 peak in TFLOP/s (H200: ~989)")
    parser.add_argument("--skip-compile", action="store_true", help="leave out the AOT compile table")
    parser.add_argument("--quick", action="store_true", help="CPU: leave out the K=V=128 KDA shapes")
    parser.add_argument("--threads", type=int, help="CPU: torch threads (steadier figures on a shared machine)")
    parser.add_argument("--json", type=Path, help="write the checks and the figures beside their goals here")
    parser.add_argument("--dry-run", action="store_true", help="the GPU rows on the CPU: interpreter, tiny shapes")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    gpu = torch.cuda.is_available() and not args.dry_run
    res = Results(device=torch.cuda.get_device_name() if gpu else "cpu", dry_run=args.dry_run)
    hbm, peak = args.hbm_tbps * 1e12, args.peak_tflops * 1e12
    if gpu or args.dry_run:
        device = "cuda" if gpu else "cpu"
        where = "the interpreter at tiny shapes (figures mean nothing)" if args.dry_run else "compiled"
        print(f"device: {res.device}  HBM {args.hbm_tbps} TB/s  bf16 peak {args.peak_tflops} TFLOP/s; Triton {where}")
        k3 = kernel_dims(load_spec("kimi-k3"))
        dims, work = (dry_dims(k3), DRY_WORKLOAD) if args.dry_run else (k3, Workload())
        with torch.inference_mode():
            gpu_kda(dims, work, hbm, peak, device, res)
            gpu_mla(dims, work, hbm, device, res)
            gpu_mxfp4(dims, hbm, device, res)
    else:
        print(f"device: cpu ({torch.get_num_threads()} threads): torch fast tier vs references; GPU rows need a GPU")
        cpu_kda(args.quick)
        cpu_others()
    if not (args.skip_compile or args.dry_run):
        compile_tables()
    if args.json:
        res.write(args.json)
    if not res.passed:
        print("benchmarks/kernels.py: a kernel disagrees with its peer (the checks above)", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
