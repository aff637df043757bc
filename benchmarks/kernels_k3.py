"""Kimi K3 non-KDA kernels against a peer and against the memory-bandwidth limit, measured in the same run.

On a GPU:
  - MLA decode (absorbed, paged latent cache) vs torch SDPA on the expanded per-head keys/values, and vs the time
    to read the latent cache once at the HBM limit; batch 64, 8k context, K3 dims.
  - MXFP4 mat-vec on the packed bytes vs dequantize-then-matmul, and vs the time to read the packed bytes once;
    batch 1, one expert's gate projection and a stack of 16 experts' (the top-k of one token).
On the CPU (no GPU): the same ops at small sizes through the torch paths, timings only.

    python benchmarks/kernels_k3.py [--hbm-tbps 4.8] [--batch 64] [--context 8192]
"""

from __future__ import annotations

import argparse
import time

import torch
from dayone.kernels.mla_decode import mla_decode
from dayone.kernels.mxfp4 import dequantize_mxfp4, mxfp4_linear

HEADS, LATENT, ROPE, NOPE, V_DIM = 96, 512, 64, 128, 128  # K3 MLA
EXPERT_IN, EXPERT_OUT = 3584, 3072  # K3 routed expert w1/w3: latent -> intermediate
PAGE_SIZE = 64


def bench(fn, device: torch.device) -> float:
    """Median seconds per call."""
    if device.type == "cuda":
        from triton.testing import do_bench

        return do_bench(fn, warmup=10, rep=50) * 1e-3
    fn()
    times = []
    for _ in range(3):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return sorted(times)[1]


def mla_inputs(batch: int, context: int, device: torch.device, heads: int):
    """Absorbed queries, a shuffled page pool exactly filled by `batch` requests of `context` tokens, the table."""
    pages_per_request = -(-context // PAGE_SIZE)
    num_pages = batch * pages_per_request
    cache = torch.randn(num_pages, PAGE_SIZE, LATENT + ROPE, device=device, dtype=torch.bfloat16)
    table = torch.randperm(num_pages, device=device).to(torch.int32).reshape(batch, pages_per_request)
    lens = torch.full((batch,), context, dtype=torch.int32, device=device)
    q = torch.randn(batch, heads, LATENT + ROPE, device=device, dtype=torch.bfloat16)
    return q, cache, table, lens


def bench_mla(batch: int, context: int, device: torch.device, hbm_bytes_per_s: float | None) -> None:
    heads = HEADS if device.type == "cuda" else 8
    scale = (NOPE + ROPE) ** -0.5
    q, cache, table, lens = mla_inputs(batch, context, device, heads)
    cache_bytes = batch * context * (LATENT + ROPE) * cache.element_size()
    t_mla = bench(lambda: mla_decode(q, cache, table, lens, LATENT, scale), device)
    line = f"mla_decode batch={batch} ctx={context} heads={heads}: {t_mla * 1e6:9.1f} us"
    line += f"  {cache_bytes / t_mla / 1e9:7.1f} GB/s"
    if hbm_bytes_per_s:
        line += f"  x{cache_bytes / hbm_bytes_per_s / t_mla:.2f} of HBM limit"
    print(line)
    if device.type != "cuda":
        return
    # the non-absorbed peer: per-head keys [k_nope | k_rope] and values, expanded once outside the timing
    k = torch.randn(batch, heads, context, NOPE + ROPE, device=device, dtype=torch.bfloat16)
    v = torch.randn(batch, heads, context, V_DIM, device=device, dtype=torch.bfloat16)
    q_full = torch.randn(batch, heads, 1, NOPE + ROPE, device=device, dtype=torch.bfloat16)
    sdpa = torch.nn.functional.scaled_dot_product_attention
    t_sdpa = bench(lambda: sdpa(q_full, k, v, scale=scale), device)
    print(f"  sdpa on expanded keys: {t_sdpa * 1e6:9.1f} us  -> mla_decode is x{t_sdpa / t_mla:.2f} faster")


def bench_mxfp4(rows: int, in_features: int, device: torch.device, hbm_bytes_per_s: float | None) -> None:
    packed = torch.randint(0, 256, (rows, in_features // 2), dtype=torch.uint8, device=device)
    scale = torch.randint(118, 130, (rows, in_features // 32), dtype=torch.uint8, device=device)
    x = torch.randn(1, in_features, dtype=torch.bfloat16, device=device)
    weight_bytes = packed.numel() + scale.numel()  # 4.25 bits per weight
    t_packed = bench(lambda: mxfp4_linear(x, packed, scale), device)
    t_dense = bench(lambda: x @ dequantize_mxfp4(packed, scale).T, device)
    line = (
        f"mxfp4_linear batch=1 [{rows} x {in_features}]: {t_packed * 1e6:9.1f} us  "
        f"{weight_bytes / t_packed / 1e9:7.1f} GB/s  dequant+matmul {t_dense * 1e6:9.1f} us (x{t_dense / t_packed:.2f})"
    )
    if hbm_bytes_per_s:
        line += f"  x{weight_bytes / hbm_bytes_per_s / t_packed:.2f} of HBM limit"
    print(line)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hbm-tbps", type=float, default=4.8, help="HBM bandwidth limit in TB/s (H200: 4.8)")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--context", type=int, default=8192)
    args = parser.parse_args()
    if torch.cuda.is_available():
        device, hbm = torch.device("cuda"), args.hbm_tbps * 1e12
        print(f"device: {torch.cuda.get_device_name()}  HBM limit {args.hbm_tbps} TB/s")
        batch, context = args.batch, args.context
    else:
        # no GPU: the torch paths at small sizes, so the script stays a quick smoke run; no bandwidth ratios
        device, hbm = torch.device("cpu"), None
        print("device: cpu (no GPU: torch paths at small sizes, no bandwidth ratios)")
        batch, context = 4, 512
    torch.manual_seed(0)
    bench_mla(batch, context, device, hbm)
    if device.type == "cuda":
        for experts in (1, 16):  # one expert's gate projection, and the top-16 of one token stacked
            bench_mxfp4(experts * EXPERT_OUT, EXPERT_IN, device, hbm)
    else:
        bench_mxfp4(512, 512, device, hbm)


if __name__ == "__main__":
    main()
