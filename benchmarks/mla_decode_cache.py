"""Fast-tier MLA decode against context length: time per decode step at a long context over a short one.

    python benchmarks/mla_decode_cache.py [--spec kimi-k3] [--batch 4] [--contexts 256,4096] [--steps 16]
                                          [--threads 1] [--json]

One MLA layer of the fast tier (bf16) at the named spec's real MLA widths (kimi-k3: hidden 7168, 96 heads, q LoRA
1536, latent 512 + rope 64, output gate) with random weights; `batch` requests, each with `context` tokens already
in the paged cache, then `steps` decode steps (one token per request), median per step. Per step, split into:
  cache write   MLAState.append_step: the new latents written in place (what the paged cache costs)
  attention     dayone.kernels.mla_decode over the page table (the torch path on a CPU: O(context) by nature)
  layer         the whole MLA layer forward (projections, absorption, cache write, attention, o_proj)
and, for comparison, `concat+repack`: the per-step cost of the cache this replaced (each request's latents
concatenated with the new row, then every request copied into one padded page), emulated at the same sizes.
Prints the ratio long/short of each: a ratio near 1 is flat in context length.
"""

from __future__ import annotations

import os
import sys

# benchmarks/ holds scripts named like modules (inspect.py shadows the standard library's): off the import path.
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != os.path.dirname(os.path.abspath(__file__))]

import argparse
import json
import statistics
import timeit

import torch


def median_step(fn, steps: int) -> float:
    """Median seconds of one call over `steps` calls, after a warm-up call (timeit: perf_counter, GC off)."""
    fn()
    return statistics.median(timeit.repeat(fn, number=1, repeat=steps))


def random_layer(spec_name: str):
    from dayone.adapters.model.config import get_tier
    from dayone.adapters.model.mla import MLA
    from dayone.spec.registry import load_spec

    spec = load_spec(spec_name)
    layer = MLA(spec, get_tier("fast"))
    gen = torch.Generator().manual_seed(0)
    for name, buf in layer.named_buffers():
        if buf is None:
            continue
        if buf.dim() == 1:  # norms
            buf.copy_(1 + 0.1 * torch.randn(buf.shape, generator=gen))
        else:
            buf.copy_(torch.randn(buf.shape, generator=gen) / buf.shape[-1] ** 0.5)
    layer.refresh_derived()
    return spec, layer


def filled_state(layer, batch: int, context: int):
    """A paged cache holding `context` random latents per request (written in prefill-sized chunks)."""
    state = layer.new_state(batch)
    gen = torch.Generator().manual_seed(1)
    for b in range(batch):
        for start in range(0, context, 1024):
            n = min(1024, context - start)
            state.append(b, torch.randn(n, layer.C + layer.R, generator=gen).bfloat16())
    return state


def concat_repack(latents: list[torch.Tensor], row: torch.Tensor) -> torch.Tensor:
    """The replaced decode cache's per-step work: extend each request by concatenation, repack into one page each."""
    for b in range(len(latents)):
        latents[b] = torch.cat([latents[b], row[b : b + 1]])
    lens = [t.shape[0] for t in latents]
    pages = row.new_zeros(len(latents), max(lens), row.shape[-1])
    for b, t in enumerate(latents):
        pages[b, : lens[b]] = t
    return pages


def measure(layer, spec, batch: int, context: int, steps: int) -> dict:
    from dayone.adapters.model.batch import Batch
    from dayone.kernels.mla_decode import mla_decode

    gen = torch.Generator().manual_seed(2)
    width = layer.C + layer.R
    out = {}
    with torch.inference_mode():
        # whole layer: a fresh cache at `context`, then decode steps (the cache grows by one token per step)
        state = filled_state(layer, batch, context)
        x = torch.randn(batch, spec.hidden_size, generator=gen).bfloat16()

        def layer_step():
            layer(x, Batch((1,) * batch, tuple(state.lengths)), state)

        out["layer"] = median_step(layer_step, steps)
        row = torch.randn(batch, width, generator=gen).bfloat16()
        out["cache write"] = median_step(lambda: state.append_step(row), steps)
        q = torch.randn(batch, layer.H, width, generator=gen).bfloat16()
        out["attention"] = median_step(
            lambda: mla_decode(q, state.pool, state.page_table, state.seq_lens, layer.C, layer.scale), steps
        )
        latents = [torch.randn(context, width, generator=gen).bfloat16() for _ in range(batch)]
        out["concat+repack"] = median_step(lambda: concat_repack(latents, row), steps)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--spec", default="kimi-k3")
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--contexts", default="256,4096", help="short,long context in tokens")
    parser.add_argument("--steps", type=int, default=16)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    short, long = (int(n) for n in args.contexts.split(","))
    spec, layer = random_layer(args.spec)
    results = {n: measure(layer, spec, args.batch, n, args.steps) for n in (short, long)}
    ratios = {part: results[long][part] / results[short][part] for part in results[short]}
    if args.json:
        print(json.dumps({"contexts": [short, long], "seconds": results, "ratio": ratios}, indent=2))
        return
    m = spec.mla
    print(f"{args.spec} MLA layer, fast tier (bf16) on the CPU, {args.threads} thread(s): batch {args.batch}, "
          f"{m.num_heads} heads, latent {m.kv_lora_rank} + rope {m.qk_rope_head_dim}; median of {args.steps} steps")  # fmt: skip
    print(f"{'per decode step':<16}{short:>10} tok (ms){long:>10} tok (ms){'ratio':>9}")
    for part in results[short]:
        print(f"{part:<16}{results[short][part] * 1e3:>18.3f}{results[long][part] * 1e3:>18.3f}{ratios[part]:>9.2f}")


if __name__ == "__main__":
    main()
