"""vLLM's side of one RL iteration, in one engine session: rollout, then refit with the trainer's weights.

Run with the vLLM peer environment's python (dayone is not installed there):

    python vllm_rl_session.py --package-site DIR --checkpoint DIR --prompts PROMPTS.json --out OUTDIR \
        --refit FILE [--wait S]

PROMPTS.json as for vllm_forward.py ([{"prompt": [ids...], "max_tokens": n}, ...]). In one `vllm.LLM` session:
1. rollout: each prompt sampled at temperature 1 (a seed per request) for max_tokens, with each sampled token's
   log-prob (vLLM's raw log-probs: Miles' rollout_log_probs), written to OUTDIR/rollout.json as soon as known;
2. score: each prompt + response sent as a prompt (prompt_logprobs, one new token): the engine's log-prob of every
   token after the first ("before");
3. refit: waits for FILE (the trainer's updated weights under checkpoint names, renamed into place when whole),
   sends its path to every worker (collective_rpc), whose model takes the tensors through its load_weights (the
   second load conform's level d checks), as RL frameworks refit a running engine; then scores again ("after").
Writes OUTDIR/session.json: {"status": "ran"|"fail", "detail", "engine", "requests": [{"prompt", "response",
"rollout_logprobs"}], "before", "after", "refit": {"tensors", "loaded", "seconds"}}.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from pathlib import Path

from vllm_forward import MAX_NUM_SEQS, _engine, _line, peer_environment

SEED = 1000


def load_refit(worker, path: str) -> list[str]:
    """Runs in every engine worker (collective_rpc): the tensors at `path` (checkpoint names) into the running model
    through its load_weights (which recomputes what the adapter derives from them), as RL frameworks refit vLLM,
    then the post-load processing of the layers that keep a processed copy of their weights, run again as vLLM's
    own in-place reload runs it:
    - on vLLM's CPU platform a linear layer's processing packs its weight for the CPU GEMM (`cpu_linear`), leaving
      the parameter empty (`dispatch_cpu_unquantized_gemm(remove_weight=True)`; the LM head keeps it): an emptied
      weight is put back first as vLLM recorded it at load (`reload.layerwise` metadata: shape, weight loader);
    - an MLA attention layer absorbs kv_b_proj into its own matrices.
    (`Worker.reload_weights` itself leaves the adapter's derived tensors and its directly copied parameters on the
    meta device: the adapter's loader writes those without the weight_loader that reload tracks.)
    Returns the parameter names load_weights reports written."""
    from safetensors.torch import load_file
    from vllm.model_executor.layers.attention import is_deferred_attention_layer
    from vllm.model_executor.model_loader.reload.layerwise import get_layerwise_info
    from vllm.model_executor.model_loader.reload.meta import materialize_meta_tensor
    from vllm.model_executor.model_loader.reload.sanitize import restore_layer_refs

    model = worker.get_model()
    packed = [m for m in model.modules() if hasattr(m, "cpu_linear") and hasattr(m, "quant_method")]
    for layer in packed:
        if layer.weight.numel() == 0:
            recorded = get_layerwise_info(layer).restore_metadata[0]["weight"]
            layer.weight = materialize_meta_tensor(restore_layer_refs(recorded, layer))
    written = model.load_weights(iter(load_file(path).items()))
    for layer in packed:
        layer.quant_method.process_weights_after_loading(layer)
    for layer in model.modules():
        if is_deferred_attention_layer(layer):
            layer.process_weights_after_loading(worker.model_config.dtype)
    return sorted(written or ())


def score(llm, sequences: list[list[int]]) -> list[list[float]]:
    """The engine's log-prob of every token after the first of each sequence (its prompt_logprobs)."""
    from vllm import SamplingParams
    from vllm.inputs import TokensPrompt

    params = SamplingParams(max_tokens=1, temperature=0.0, prompt_logprobs=0, detokenize=False)
    outputs = llm.generate([TokensPrompt(prompt_token_ids=s) for s in sequences], params, use_tqdm=False)
    return [[entry[s[t]].logprob for t, entry in enumerate(out.prompt_logprobs) if t > 0]
            for s, out in zip(sequences, outputs, strict=True)]  # fmt: skip


def run(args, result: dict) -> None:
    from vllm import SamplingParams
    from vllm.inputs import TokensPrompt

    llm, prompts = _engine(args)
    result["engine"] = {"dtype": args.dtype, "world_size": args.world_size,
                        "prefix_caching": llm.llm_engine.vllm_config.cache_config.enable_prefix_caching}  # fmt: skip
    params = [
        SamplingParams(max_tokens=p["max_tokens"], temperature=1.0, seed=SEED + i, logprobs=0, detokenize=False,
                       ignore_eos=True)
        for i, p in enumerate(prompts)
    ]  # fmt: skip
    outputs = llm.generate([TokensPrompt(prompt_token_ids=p["prompt"]) for p in prompts], params, use_tqdm=False)
    for prompt, out in zip(prompts, outputs, strict=True):
        done = out.outputs[0]
        logprobs = [entry[tok].logprob for tok, entry in zip(done.token_ids, done.logprobs, strict=True)]
        result["requests"].append({"prompt": prompt["prompt"], "response": list(done.token_ids),
                                   "rollout_logprobs": logprobs})  # fmt: skip
    partial = args.out / "rollout.json.partial"
    partial.write_text(json.dumps({"requests": result["requests"]}, indent=1))
    partial.rename(args.out / "rollout.json")
    sequences = [r["prompt"] + r["response"] for r in result["requests"]]
    result["before"] = score(llm, sequences)

    deadline = time.monotonic() + args.wait
    while not args.refit.is_file():
        if time.monotonic() > deadline:
            raise TimeoutError(f"no refit weights at {args.refit} after {args.wait} s")
        time.sleep(0.5)
    start = time.perf_counter()
    per_worker = llm.collective_rpc(load_refit, args=(str(args.refit),))
    from safetensors import safe_open

    with safe_open(str(args.refit), "pt") as f:
        sent = len(list(f.keys()))
    result["refit"] = {"tensors": sent, "loaded": len(per_worker[0]), "seconds": round(time.perf_counter() - start, 3)}
    result["after"] = score(llm, sequences)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--package-site", type=Path, required=True, help="the adapter installed with pip --target")
    parser.add_argument("--checkpoint", type=Path, required=True)
    parser.add_argument("--prompts", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--refit", type=Path, required=True, help="the trainer's weights, waited for")
    parser.add_argument("--wait", type=float, default=900.0, help="seconds to wait for --refit")
    parser.add_argument("--dtype", default="float32")
    args = parser.parse_args(argv)
    args.world_size, args.max_num_seqs = 1, MAX_NUM_SEQS  # what _engine reads
    args.out.mkdir(parents=True, exist_ok=True)
    peer_environment(args.package_site)
    result: dict = {"status": "ran", "detail": "", "requests": []}
    try:
        run(args, result)
    except Exception as err:  # noqa: BLE001 -- one line for the test; the traceback beside it
        result |= {"status": "fail", "detail": _line(err), "traceback": traceback.format_exc()[-4000:]}
    (args.out / "session.json").write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
