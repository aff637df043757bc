"""vLLM's side of one RL iteration, in one engine session: rollout, then refit with the trainer's weights.

Run with the vLLM peer environment's python (dayone is not installed there):

    python vllm_rl_session.py --package-site DIR --checkpoint DIR --prompts PROMPTS.json --out OUTDIR \
        --refit FILE [--wait S]

PROMPTS.json as for vllm_forward.py ([{"prompt": [ids...], "max_tokens": n}, ...]). In one `vllm.LLM` session:
1. rollout: each prompt sampled at temperature 1 (a seed per request) for max_tokens, with each sampled token's
   log-prob (vLLM's raw log-probs: Miles' rollout_log_probs), written to OUTDIR/rollout.json as soon as known;
2. score: each prompt + response sent as a prompt (prompt_logprobs, one new token): the engine's log-prob of every
   token after the first ("before");
3. refit: waits for FILE (the trainer's updated weights under checkpoint names, renamed into place when whole)
   and hands its folder to vLLM's own in-place weight update, `LLM.collective_rpc("reload_weights")`: every
   worker's `reload_weights` streams the files through vLLM's loader into the running model's load_weights (the
   second load conform's level d checks) and redoes vLLM's post-load processing layer by layer; then scores again
   ("after").
Writes OUTDIR/session.json: {"status": "ran"|"fail", "detail", "engine", "requests": [{"prompt", "response",
"rollout_logprobs"}], "before", "after", "refit": {"tensors", "seconds", "meta"}}, where "meta" names every
tensor of the model (parameters, buffers, tensors the adapter derives) left on the meta device after the refit.
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


def meta_tensors(worker) -> list[str]:
    """Runs in every engine worker (collective_rpc): the names of the model's tensors on the meta device, the
    placeholders vLLM's in-place reload puts in while it loads (none should outlive it): parameters, buffers and
    the tensors modules hold as plain attributes (what the adapter derives from the weights)."""
    import torch

    names = []
    for module_name, module in worker.get_model().named_modules():
        held = {**module._parameters, **module._buffers}
        held |= {k: v for k, v in vars(module).items() if isinstance(v, torch.Tensor)}
        names += [f"{module_name}.{k}" for k, v in held.items() if v is not None and v.is_meta]
    return sorted(names)


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
    from safetensors import safe_open

    with safe_open(str(args.refit), "pt") as f:
        sent = len(list(f.keys()))
    weights = args.out / "refit"  # a folder of its own: vLLM's loader reads every *.safetensors of the folder
    weights.mkdir()
    (weights / "model.safetensors").symlink_to(args.refit.resolve())
    start = time.perf_counter()
    llm.collective_rpc("reload_weights", kwargs={"weights_path": str(weights)})
    seconds = round(time.perf_counter() - start, 3)
    meta = sorted(set().union(*llm.collective_rpc(meta_tensors)))
    result["refit"] = {"tensors": sent, "seconds": seconds, "meta": meta}
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
    args.world_size, args.max_num_seqs, args.expert_parallel, args.builtin = 1, MAX_NUM_SEQS, False, False  # _engine's
    args.out.mkdir(parents=True, exist_ok=True)
    peer_environment(args.package_site, args.out)
    result: dict = {"status": "ran", "detail": "", "requests": []}
    try:
        run(args, result)
    except Exception as err:  # noqa: BLE001 -- one line for the test; the traceback beside it
        result |= {"status": "fail", "detail": _line(err), "traceback": traceback.format_exc()[-4000:]}
    (args.out / "session.json").write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
