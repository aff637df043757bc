"""Validation benchmarks: model forward time against transformers, and peak memory of a streamed validation.

    python benchmarks/validate.py [--threads 1] [--tokens 2x256] [--layers 8] [--skip-rss] [--skip-speed]
    python benchmarks/validate.py --skip-speed --skip-rss --faithful [--faithful-checkpoint DIR]

(a) speed: one tiny Kimi Linear checkpoint written by transformers' save_pretrained (hidden 256, 4 layers: 3 KDA
    + 1 MLA, 16 experts top-4, KDA head dim 64) and one batch of tokens; the forward time of dayone's reference tier
    (fp32) and fast tier (bf16, chunked KDA, batched experts) against transformers' KimiLinearForCausalLM forward
    (fp32, eval, its torch path), resident weights, median of repeats. Ratios > 1 mean dayone is faster.
(b) memory: `integrate validate` (fast vs reference tier, reload check on) in a child process on a synthetic K3
    checkpoint with wide experts, at least 4x the bytes of its largest layer; the child's peak RSS above its RSS
    right before validation starts, against the resident size of one layer in each tier ("two layers of weights")
    and of the whole model.
(c) faithful scale (--faithful, minutes): `integrate validate`'s work (the built-in 2 x 72 tokens, fast tier vs the
    reference tier, reload check and noise floor on) on a K3 at the faithful scale (`synth kimi-k3 --scale faithful`:
    every per-head and per-expert width of K3, 4 layers, 1.5 GB; written first unless --faithful-checkpoint names
    one), in this process: the wall time, each layer's, each side's (reference, candidate, floor: the report's own
    figures) and where it goes by operation (MXFP4 dequantization, the experts' matmuls, KDA, MLA, weight loading).
Threads: one by default, so a shared machine's other load does not turn OpenMP spinning into the measurement.
"""

from __future__ import annotations

import os
import sys

# benchmarks/ holds scripts named like modules (inspect.py shadows the standard library's): off the import path.
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != os.path.dirname(os.path.abspath(__file__))]

import argparse
import json
import math
import statistics
import subprocess
import tempfile
import time
import timeit
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]


# ----- (a) speed against transformers
def kimi_linear_checkpoint(path: Path) -> None:
    from transformers import KimiLinearConfig, KimiLinearForCausalLM

    config = KimiLinearConfig(
        vocab_size=4096, hidden_size=256, intermediate_size=768, moe_intermediate_size=128, num_hidden_layers=4,
        num_attention_heads=4, num_key_value_heads=4, kv_lora_rank=64, q_lora_rank=None, qk_rope_head_dim=16,
        v_head_dim=64, qk_nope_head_dim=64, num_local_experts=16, num_experts_per_tok=4, n_shared_experts=1,
        first_k_dense_replace=1, pad_token_id=0, bos_token_id=1, eos_token_id=2,
        linear_attn_config={"kda_layers": [1, 2, 3], "full_attn_layers": [4], "head_dim": 64, "num_heads": 4,
                            "short_conv_kernel_size": 4},
    )  # fmt: skip
    torch.manual_seed(0)
    model = KimiLinearForCausalLM(config).float().eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() >= 2 and "conv" not in name:
                p.normal_(0, 0.5 / math.sqrt(p.shape[-1]))
    model.save_pretrained(path)


def median_time(fn, repeats: int) -> float:
    """Median seconds of one call over `repeats` calls, after a warm-up call (timeit: perf_counter, GC off)."""
    fn()
    return statistics.median(timeit.repeat(fn, number=1, repeat=repeats))


def bench_speed(tokens: tuple[int, int], repeats: int) -> dict:
    os.environ.setdefault("USE_HUB_KERNELS", "NO")
    import transformers
    from dayone.adapters.model import SpecModel, load_checkpoint_dir
    from dayone.checkpoint import open_checkpoint
    from dayone.checkpoint.spec_source import spec_for_checkpoint
    from transformers import KimiLinearForCausalLM

    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "kimi-linear-bench"
        kimi_linear_checkpoint(path)
        spec = spec_for_checkpoint(open_checkpoint(str(path)), None)
        hf = KimiLinearForCausalLM.from_pretrained(str(path), dtype=torch.float32).eval()
        ours = {}
        for tier in ("reference", "fast"):
            ours[tier] = SpecModel(spec, tier)
            load_checkpoint_dir(ours[tier], spec, path)
    ids = torch.randint(3, spec.vocab_size, tokens, generator=torch.Generator().manual_seed(0))
    with torch.inference_mode():
        t_hf = median_time(lambda: hf(input_ids=ids), repeats)
        t_ref = median_time(lambda: ours["reference"](ids), repeats)
        t_fast = median_time(lambda: ours["fast"](ids), repeats)
    return {"tokens": list(tokens), "transformers_s": t_hf, "reference_s": t_ref, "fast_s": t_fast,
            "reference_vs_transformers": t_hf / t_ref, "fast_vs_transformers": t_hf / t_fast}  # fmt: skip


# ----- (b) peak RSS of a streamed validation
CHILD = r"""
import json, resource, sys, torch
torch.set_num_threads(int(sys.argv[3]))
from dayone.checkpoint import open_checkpoint
from dayone.checkpoint.spec_source import spec_for_checkpoint
from dayone.validate import Options, validate
def run():  # as `integrate validate` does: open the checkpoint and take its spec, then validate
    checkpoint = open_checkpoint(sys.argv[1])
    return validate(checkpoint, spec_for_checkpoint(checkpoint, None), options).report
def status(key):
    for line in open("/proc/self/status"):
        if line.startswith(key):
            return int(line.split()[1]) * 1024
options = Options(reference="naive", tokens=sys.argv[2])
before = status("VmRSS")
run()  # warm-up: imports, thread pools, allocator, caches
cold_peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
base = status("VmRSS")
open("/proc/self/clear_refs", "w").write("5")  # reset the peak (VmHWM)
report = run()
print(json.dumps({"before": before, "cold_peak": cold_peak, "base": base, "peak": status("VmHWM"),
                  "status": report.status, "seconds": report.details["seconds"]}))
"""


def resident_bytes(t, tier_bytes: int) -> int:
    """Bytes a tier keeps for manifest tensor t: MXFP4 pairs as stored, other weights at the tier's width."""
    if t.role.startswith("passthrough"):
        return 0
    if t.role.endswith((".packed", ".scale")):
        return t.nbytes
    return t.numel * tier_bytes


def layer_bytes(manifest) -> tuple[dict, dict]:
    """Per layer: checkpoint bytes, and resident bytes of the layer in both tiers (fp32 reference + bf16 fast)."""
    on_disk: dict = {}
    resident: dict = {}
    for t in manifest.tensors:
        on_disk[t.layer] = on_disk.get(t.layer, 0) + t.nbytes
        resident[t.layer] = resident.get(t.layer, 0) + resident_bytes(t, 4) + resident_bytes(t, 2)
    return on_disk, resident


def bench_rss(layers: int, threads: int) -> dict:
    from dayone.spec.manifest import build_manifest
    from dayone.spec.registry import load_spec
    from dayone.synth import Scale, scaled_spec, write_synthetic

    wide = Scale(hidden=512, vocab=4096, heads=8, head_dim=64, q_lora=128, kv_lora=128, qk_nope=64, qk_rope=32,
                 v_head=64, experts=128, experts_per_token=4, expert_intermediate=256, latent=512,
                 dense_intermediate=2048, vision_hidden=16, vision_intermediate=32, vision_heads=2,
                 vision_pos_emb=4)  # fmt: skip
    spec = scaled_spec(load_spec("kimi-k3"), wide, layers)
    manifest = build_manifest(spec)
    on_disk, resident = layer_bytes(manifest)
    total = sum(on_disk.values())
    largest = max((k for k in on_disk if k is not None), key=lambda k: on_disk[k])
    two_layers = resident[largest]  # the largest layer, once in each tier
    whole_resident = sum(resident.values())
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "k3-wide"
        start = time.perf_counter()
        write_synthetic(spec, path, seed=0, num_shards=layers + 1)
        written = time.perf_counter() - start
        tokens = ",".join(str(i) for i in range(3, 35))
        env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
        proc = subprocess.run([sys.executable, "-c", CHILD, str(path), tokens, str(threads)], capture_output=True,
                              text=True, env=env, check=True)  # fmt: skip
        child = json.loads(proc.stdout.strip().splitlines()[-1])
    grew = child["peak"] - child["base"]
    return {
        "layers": layers, "checkpoint_bytes": total, "largest_layer_bytes": on_disk[largest],
        "checkpoint_over_largest_layer": total / on_disk[largest], "two_layers_resident_bytes": two_layers,
        "whole_model_resident_bytes": whole_resident, "rss_before_bytes": child["base"],
        "cold_rss_before_bytes": child["before"], "cold_peak_rss_bytes": child["cold_peak"],
        "peak_rss_bytes": child["peak"], "peak_growth_bytes": grew,
        "growth_over_two_layers": grew / two_layers, "growth_over_whole_model": grew / whole_resident,
        "status": child["status"], "seconds": child["seconds"], "synth_seconds": written,
    }  # fmt: skip


# ----- (c) faithful scale: where a validation's time goes
# (what is timed, module, attribute): every place the model calls it, so that nested calls are counted once
TIMED = (
    ("MXFP4 dequantize", "dayone.adapters.model.moe", "dequantize_mxfp4_reference"),
    ("MXFP4 dequantize", "dayone.kernels.mxfp4.ops", "dequantize_mxfp4_reference"),
    ("experts' matmuls", "dayone.adapters.model.moe", "Experts.one"),
    ("experts' matmuls", "dayone.adapters.model.moe", "Experts.one_packed"),
    ("KDA", "dayone.adapters.model.kda", "KDA.forward"),
    ("MLA", "dayone.adapters.model.mla", "MLA.forward"),
    ("weight loading", "dayone.adapters.model.weights", "WeightLoader.load_layer"),
    ("weight loading", "dayone.adapters.model.weights", "WeightLoader.load_embedding"),
    ("weight loading", "dayone.adapters.model.weights", "WeightLoader.load_head"),
)


def bench_faithful(checkpoint: Path | None) -> dict:
    import importlib

    from dayone import present
    from dayone.checkpoint import open_checkpoint
    from dayone.checkpoint.spec_source import spec_for_checkpoint
    from dayone.validate import Options, validate

    spent: dict[str, float] = {name: 0.0 for name, _, _ in TIMED}

    def timed(name, fn):
        def wrapper(*args, **kwargs):
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                spent[name] += time.perf_counter() - start

        return wrapper

    for name, module, attribute in TIMED:
        owner = importlib.import_module(module)
        if "." in attribute:
            owner, attribute = getattr(owner, attribute.split(".")[0]), attribute.split(".")[1]
        setattr(owner, attribute, timed(name, getattr(owner, attribute)))
    layers: list[tuple[str, float]] = []
    present.set_step_sink(lambda text: layers.append((text, time.perf_counter())))
    with tempfile.TemporaryDirectory() as tmp:
        synth_s = None
        if checkpoint is None:
            from dayone.spec.registry import load_spec
            from dayone.synth import scaled_spec, write_synthetic

            checkpoint = Path(tmp) / "kimi-k3-faithful"
            start = time.perf_counter()
            write_synthetic(scaled_spec(load_spec("kimi-k3"), "faithful"), checkpoint, seed=0, num_shards=96)
            synth_s = time.perf_counter() - start
        start = time.perf_counter()
        opened = open_checkpoint(str(checkpoint))
        spec = spec_for_checkpoint(opened, None)
        report = validate(opened, spec, Options()).report
        wall = time.perf_counter() - start
    ends = [t for _, t in layers[1:]] + [start + wall]
    per_layer = {text.split(": ", 1)[1]: end - t for (text, t), end in zip(layers, ends, strict=True)}
    return {"checkpoint": str(checkpoint), "layers": spec.num_layers, "hidden": spec.hidden_size,
            "status": report.status, "wall_s": wall, "synth_s": synth_s, "per_layer_s": per_layer,
            "sides_s": report.details["seconds"], "by_operation_s": spent,
            "other_s": wall - sum(spent.values())}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--tokens", default="2x256", help="BxT for the speed run")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--layers", type=int, default=8, help="layers of the memory run's synthetic checkpoint")
    parser.add_argument("--skip-speed", action="store_true")
    parser.add_argument("--skip-rss", action="store_true")
    parser.add_argument("--faithful", action="store_true", help="(c): validate a faithful-scale K3 (minutes)")
    parser.add_argument("--faithful-checkpoint", type=Path, help="(c) on this checkpoint instead of a new one")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    out = {"threads": args.threads}
    if not args.skip_speed:
        B, T = (int(x) for x in args.tokens.split("x"))
        out["speed"] = s = bench_speed((B, T), args.repeats)
        if not args.json:
            print(f"(a) forward of {B}x{T} tokens, tiny Kimi Linear, {args.threads} thread(s):")
            print(f"    transformers {s['transformers_s'] * 1e3:8.1f} ms")
            print(
                f"    reference    {s['reference_s'] * 1e3:8.1f} ms   {s['reference_vs_transformers']:.2f}x transformers"
            )
            print(f"    fast         {s['fast_s'] * 1e3:8.1f} ms   {s['fast_vs_transformers']:.2f}x transformers")
    if not args.skip_rss:
        out["rss"] = r = bench_rss(args.layers, args.threads)
        if not args.json:
            mb = 1e6
            print(f"(b) validate, synthetic K3 {r['layers']} layers, {r['checkpoint_bytes'] / mb:.0f} MB on disk "
                  f"({r['checkpoint_over_largest_layer']:.1f}x its largest layer, {r['largest_layer_bytes'] / mb:.0f} MB):")  # fmt: skip
            print(f"    peak RSS {r['peak_rss_bytes'] / mb:.0f} MB, {r['peak_growth_bytes'] / mb:.0f} MB above the "
                  f"{r['rss_before_bytes'] / mb:.0f} MB of the warmed-up process before validation (first, cold run: "
                  f"{r['cold_rss_before_bytes'] / mb:.0f} -> {r['cold_peak_rss_bytes'] / mb:.0f} MB)")  # fmt: skip
            print(f"    vs the largest layer resident once per tier (\"two layers\": fp32 + bf16, experts packed): "
                  f"{r['two_layers_resident_bytes'] / mb:.0f} MB -> {r['growth_over_two_layers']:.2f}x")  # fmt: skip
            print(f"    vs the whole model resident in both tiers: {r['whole_model_resident_bytes'] / mb:.0f} MB -> "
                  f"{r['growth_over_whole_model']:.2f}x; verdict {r['status']}")  # fmt: skip
    if args.faithful:
        out["faithful"] = f = bench_faithful(args.faithful_checkpoint)
        if not args.json:
            print(f"(c) validate at the faithful scale ({f['layers']} layers, hidden {f['hidden']}), "
                  f"{args.threads} thread(s): {f['wall_s']:.0f} s, verdict {f['status']}")  # fmt: skip
            print("    per layer: " + ", ".join(f"{k} {v:.0f} s" for k, v in f["per_layer_s"].items()))
            print("    per side:  " + ", ".join(f"{k} {v:.0f} s" for k, v in f["sides_s"].items()))
            for name, seconds in sorted(f["by_operation_s"].items(), key=lambda item: -item[1]):
                print(f"    {name:18} {seconds:7.1f} s  {seconds / f['wall_s']:5.1%}")
            print(f"    {'everything else':18} {f['other_s']:7.1f} s  {f['other_s'] / f['wall_s']:5.1%}")
    if args.json:
        print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
