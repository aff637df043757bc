"""SGLang forward probe: the generated model class generating greedily inside SGLang's parallel state, fed
ForwardBatch objects as SGLang's scheduler feeds its ModelRunner (an extend batch, then decode steps).

Run with the SGLang peer environment's python (dayone is not installed there):

    python sglang_forward.py --package-site DIR --checkpoint DIR --world-size N --dtype float32 \
        --prompts PROMPTS.json --out OUTDIR

What it is, exactly (the level's detail says so): the model forward without SGLang's scheduler and ModelRunner.
SGLang's ModelRunner cannot start on a CPU from the package index: its CPU engine needs sgl-kernel's CPU build,
which is not published there. So, per rank (torch.multiprocessing, gloo), as sglang_probe.py does up to "loaded":
SGLang's runtime context, ModelConfig and parallel state, the model built by SGLang's loader and filled by its own
load_weights; then SGLang's own request-to-token pool, MLA KV pool and torch-native attention backend, inside
SGLang's forward context, with ForwardBatch objects whose fields are those ScheduleBatch hands ForwardBatch.init_new
(positions and extend offsets by SGLang's compute_position / clamp_position). Requests are scheduled as SGLang's
scheduler does with at most MAX_RUNNING at once: new requests are prefilled in one extend batch, then the running
ones decode together; a waiting request is prefilled when a running one finishes, so decode batches mix sequence
lengths. Logits are SGLang's LogitsProcessor's (every position: hidden states captured in full, through its
_get_logits, the TP all-gather included); tokens are greedy (argmax), log-probs log_softmax in fp32.

Writes OUTDIR/forward.json (the schema of vllm_forward.py: status, detail, engine, requests with prompt / output /
prompt_logprobs / output_logprobs, seconds, tokens, what) and OUTDIR/layers.safetensors: each decoder layer's output
during the first extend batch ("layers.{i}" [N, D]) and its positions.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from itertools import chain
from pathlib import Path

MAX_RUNNING = 2  # fewer than the prompts: the last waits, and is prefilled while the others are mid-decode
WHAT = (
    "SGLang model forward without its scheduler: the generated model class in SGLang's parallel state, fed "
    "scheduler-shaped ForwardBatch objects (extend, then decode) with SGLang's torch-native attention backend and "
    "KV pools; SGLang's ModelRunner cannot start on a CPU from the package index (sgl-kernel's CPU build is not "
    "published there)"
)


def _line(err: BaseException) -> str:
    text = " ".join(str(err).split()) or type(err).__name__
    return f"{type(err).__name__}: {text}"[:600]


class Engine:
    """SGLang's pools and attention backend around a loaded model, stepping requests as the scheduler does."""

    def __init__(self, model, config, prompts: list[dict]) -> None:
        import torch
        from sglang.srt.layers.attention.torch_native_backend import TorchNativeAttnBackend
        from sglang.srt.mem_cache.memory_pool import MLATokenToKVPool, ReqToTokenPool

        self.model, self.prompts = model, prompts
        text = config.hf_text_config
        longest = max(len(p["prompt"]) + p["max_tokens"] for p in prompts)
        tokens = sum(len(p["prompt"]) + p["max_tokens"] for p in prompts)
        self.req_to_token = ReqToTokenPool(size=len(prompts), max_context_len=longest + 1, device="cpu",
                                           enable_memory_saver=False)  # fmt: skip
        if not config.attention_arch.name == "MLA":
            raise RuntimeError(f"the probe builds an MLA KV pool; SGLang's attention arch is {config.attention_arch}")
        self.kv = MLATokenToKVPool(size=tokens + 1, page_size=1, dtype=config.dtype, kv_lora_rank=text.kv_lora_rank,
                                   qk_rope_head_dim=text.qk_rope_head_dim, layer_num=text.num_hidden_layers,
                                   device="cpu", enable_memory_saver=False)  # fmt: skip
        runner = type("PoolsOnly", (), {"device": "cpu", "req_to_token_pool": self.req_to_token,
                                        "token_to_kv_pool": self.kv})()  # fmt: skip
        self.backend = TorchNativeAttnBackend(runner)
        self.next_loc = 1  # slot 0 is the pools' padding row, as SGLang's allocators keep it
        self.torch = torch

    # ----- batches, as ScheduleBatch gives them to ForwardBatch.init_new

    def _locs(self, slot: int, start: int, count: int):
        locs = self.torch.arange(self.next_loc, self.next_loc + count, dtype=self.torch.int64)
        self.next_loc += count
        self.req_to_token.write((slot, slice(start, start + count)), locs.to(self.torch.int32))
        return locs

    def extend(self, reqs: list[dict]):
        from sglang.srt.model_executor.forward_batch_info import ForwardMode, compute_position

        torch = self.torch
        lens = [len(r["ids"]) for r in reqs]
        out_cache_loc = torch.cat([self._locs(r["slot"], 0, n) for r, n in zip(reqs, lens, strict=True)])
        batch = self._batch(ForwardMode.EXTEND, [r["ids"] for r in reqs], reqs, lens, out_cache_loc)
        batch.extend_seq_lens = torch.tensor(lens, dtype=torch.int32)
        batch.extend_prefix_lens = torch.zeros(len(reqs), dtype=torch.int32)
        batch.extend_seq_lens_cpu, batch.extend_prefix_lens_cpu = lens, [0] * len(reqs)
        batch.extend_num_tokens = sum(lens)
        batch.extend_logprob_start_lens_cpu = [0] * len(reqs)
        batch.positions, batch.extend_start_loc = compute_position(
            "torch_native", batch.extend_prefix_lens, batch.extend_seq_lens, batch.extend_num_tokens
        )
        return batch

    def decode(self, reqs: list[dict]):
        from sglang.srt.model_executor.forward_batch_info import ForwardMode, clamp_position

        lens = [len(r["ids"]) for r in reqs]  # the token being decoded included, as SGLang's seq_lens count it
        out_cache_loc = self.torch.cat([self._locs(r["slot"], n - 1, 1) for r, n in zip(reqs, lens, strict=True)])
        batch = self._batch(ForwardMode.DECODE, [r["ids"][-1:] for r in reqs], reqs, lens, out_cache_loc)
        batch.positions = clamp_position(batch.seq_lens)
        return batch

    def _batch(self, mode, inputs: list[list[int]], reqs: list[dict], lens: list[int], out_cache_loc):
        from sglang.srt.model_executor.forward_batch_info import CaptureHiddenMode, ForwardBatch

        torch = self.torch
        seq_lens = torch.tensor(lens, dtype=torch.int64)
        return ForwardBatch(
            forward_mode=mode, batch_size=len(reqs), input_ids=torch.tensor(list(chain(*inputs)), dtype=torch.int64),
            req_pool_indices=torch.tensor([r["slot"] for r in reqs], dtype=torch.int64), seq_lens=seq_lens,
            out_cache_loc=out_cache_loc, seq_lens_sum=sum(lens), seq_lens_cpu=seq_lens.clone(),
            capture_hidden_mode=CaptureHiddenMode.FULL, return_logprob=False,
            top_logprobs_nums=[0] * len(reqs), token_ids_logprobs=[None] * len(reqs),
        )  # fmt: skip

    # ----- one step

    def step(self, batch):
        """The model on one batch in SGLang's forward context -> log-probs [tokens, vocab] fp32 at every position
        (decode: one per request)."""
        from sglang.srt.layers.logits_processor import LogitsMetadata
        from sglang.srt.model_executor.forward_context import ForwardContext, forward_context
        from sglang.srt.model_executor.runner_utils.forward_batch import set_forward_batch

        with forward_context(ForwardContext(attn_backend=self.backend), forward_batch=batch), set_forward_batch(batch):
            self.backend.init_forward_metadata(batch)
            output = self.model.forward(batch.input_ids, batch.positions, batch)
            processor, head = self.model.logits_processor, _lm_head(self.model)
            logits = processor._get_logits(output.hidden_states, head, LogitsMetadata.from_forward_batch(batch))
        return self.torch.log_softmax(logits[:, : _vocab(self.model)].float(), -1)

    # ----- the scheduler's loop

    def generate(self) -> tuple[list[dict], float, float]:
        """Every prompt to its max_tokens, greedily -> (requests as forward.json has them, seconds, prefill seconds)."""
        waiting = [{"n": n, "ids": list(p["prompt"]), "max": p["max_tokens"], "out": [], "prompt_lp": [None],
                    "out_lp": [], "slot": self.req_to_token.free_slots.pop(0)} for n, p in enumerate(self.prompts)]  # fmt: skip
        running, done, prefill_s = [], [], 0.0
        start = time.perf_counter()
        while waiting or running:
            admitted = waiting[: MAX_RUNNING - len(running)]
            if admitted:  # SGLang's scheduler prefers a prefill batch when requests wait and there is room
                waiting = waiting[len(admitted) :]
                began = time.perf_counter()
                logprobs = self.step(self.extend(admitted))
                prefill_s += time.perf_counter() - began
                at = 0
                for req in admitted:
                    n = len(req["ids"])
                    rows = logprobs[at : at + n]
                    req["prompt_lp"] += [float(rows[t - 1, req["ids"][t]]) for t in range(1, n)]
                    self._choose(req, rows[-1])
                    at += n
                running += admitted
            else:
                logprobs = self.step(self.decode(running))
                for req, row in zip(running, logprobs, strict=True):
                    self._choose(req, row)
            done += [r for r in running if len(r["out"]) == r["max"]]
            running = [r for r in running if len(r["out"]) < r["max"]]
        seconds = time.perf_counter() - start
        done.sort(key=lambda r: r["n"])
        requests = [{"prompt": list(self.prompts[r["n"]]["prompt"]), "output": r["out"],
                     "prompt_logprobs": r["prompt_lp"], "output_logprobs": r["out_lp"]} for r in done]  # fmt: skip
        return requests, seconds, prefill_s

    @staticmethod
    def _choose(req: dict, row) -> None:
        token = int(row.argmax())
        req["out"].append(token)
        req["out_lp"].append(float(row[token]))
        if len(req["out"]) < req["max"]:
            req["ids"].append(token)  # the next decode step's input


def _language_model(model):
    return getattr(model, "language_model", model)


def _lm_head(model):
    return _language_model(model).lm_head


def _vocab(model) -> int:
    return _lm_head(model).org_vocab_size


def record_first_step(model, path: Path, positions_of) -> None:
    """Forward hooks on the decoder layers save each layer's output during the first step (tensor-parallel rank 0:
    the residual stream is whole on every rank) and the step's positions to `path`."""
    import torch
    from safetensors.torch import save_file

    layers = _language_model(model).model.layers
    seen: dict[str, torch.Tensor] = {}

    def hook(index: int):
        def record(module, inputs, output) -> None:
            if "done" in seen:
                return
            seen[f"layers.{index}"] = (output[0] if isinstance(output, tuple) else output).detach().float().clone()
            if index == len(layers) - 1:
                seen["positions"] = positions_of().detach().clone()
                save_file({k: v.contiguous() for k, v in seen.items()}, str(path))
                seen["done"] = torch.ones(1)

        return record

    for i, layer in enumerate(layers):
        layer.register_forward_hook(hook(i))


def rank_main(rank: int, world: int, port: int, site: str, checkpoint: str, prompts: str, dtype: str, out: str,
              expert_parallel: bool):  # fmt: skip
    import torch
    from cores import per_rank  # this folder is on sys.path

    torch.set_num_threads(per_rank(world))
    sys.path.insert(0, site)
    import sglang_probe as probe

    package = probe.package_name(Path(site))
    os.environ["SGLANG_EXTERNAL_MODEL_PACKAGE"] = package
    out_dir, ckpt = Path(out), Path(checkpoint)
    verdict = probe.Verdict()
    result: dict = {"status": "fail", "what": WHAT}
    try:
        probe.import_rotary_with_cpu_engine()
        probe.load_plugins()
        result["detail"], model, config = _levels_up_to_loaded(
            probe, verdict, package, ckpt, rank, world, port, dtype, expert_parallel
        )
        if model is not None:
            engine = Engine(model, config, json.loads(Path(prompts).read_text()))
            if rank == 0:
                current = {}
                record_first_step(model, out_dir / "layers.safetensors", lambda: current["batch"].positions)
                step = engine.step

                def remembered(batch):
                    current["batch"] = batch
                    return step(batch)

                engine.step = remembered
            requests, seconds, prefill_s = engine.generate()
            result = {
                "status": "ran", "detail": "", "what": WHAT, "requests": requests,
                "engine": {"dtype": dtype, "world_size": world, "max_running_requests": MAX_RUNNING,
                           "expert_parallel": expert_parallel,
                           "attention_backend": "torch_native", "prefix_caching": False,
                           "prefix_caching_reason": "off: no radix cache without SGLang's scheduler"},
                "seconds": {"generate": round(seconds, 3), "prefill": round(prefill_s, 3)},
                "tokens": {"prefill": sum(len(r["prompt"]) for r in requests),
                           "decode": sum(len(r["output"]) - 1 for r in requests)},
            }  # fmt: skip
            if (out_dir / "layers.safetensors").is_file():
                result["layers"] = "layers.safetensors"
    except Exception as err:  # noqa: BLE001 -- the level's one line; the traceback beside it
        result = {"status": "fail", "what": WHAT, "detail": _line(err), "traceback": traceback.format_exc()[-4000:]}
    if rank == 0:
        probe.atomic_json(out_dir / "forward.json", result)


def _levels_up_to_loaded(probe, verdict, package, ckpt, rank, world, port, dtype, expert_parallel) -> tuple:
    """sglang_probe's levels up to a model filled by its own load_weights -> (None, model, ModelConfig), or (the
    first level not passed, as one line, None, None)."""
    from sglang.srt.model_loader.loader import post_load_weights

    if probe.discover(verdict, package, probe.architectures(ckpt)) is None:
        return f"discovered: {verdict.levels['discovered']['detail']}", None, None
    accepted = probe.accept(verdict, ckpt, rank, world, dtype, expert_parallel)
    if accepted is None:
        return f"accepted: {verdict.levels['accepted']['detail']}", None, None
    model = probe.build(verdict, *accepted, rank, world, port)
    if model is None:
        return f"built: {verdict.levels['built']['detail']}", None, None
    probe.load_once(model, sorted(str(p) for p in ckpt.glob("*.safetensors")), lambda tensor: tensor)
    post_load_weights(model)
    return None, model, accepted[1]


def run_job(site: Path, checkpoint: Path, world: int, dtype: str, prompts: Path, out: Path, start_method: str,
            expert_parallel: bool = False) -> None:  # fmt: skip
    """One forward: `world` ranks forked from this process (SGLang imported: sglang_probe.warm) write
    out/forward.json, or this process writes the failure when a rank died before it could."""
    import sglang_probe as probe  # the sibling probe (this folder is on sys.path)
    import torch.multiprocessing as mp

    out.mkdir(parents=True, exist_ok=True)
    ranks = (world, probe.free_port(), str(site.resolve()), str(checkpoint.resolve()), str(prompts.resolve()), dtype,
             str(out.resolve()), expert_parallel)  # fmt: skip
    try:
        mp.start_processes(rank_main, args=ranks, nprocs=world, join=True, start_method=start_method)
    except mp.ProcessExitedException as err:
        if not (out / "forward.json").is_file():
            probe.atomic_json(out / "forward.json", {"status": "fail", "what": WHAT, "detail": _line(err)})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--package-site", type=Path, required=True)
    parser.add_argument("--checkpoint", type=Path, required=True)
    parser.add_argument("--world-size", type=int, default=1)
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--prompts", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--expert-parallel", action="store_true", help="SGLang's --ep-size, the world size")
    args = parser.parse_args(argv)
    import sglang_probe as probe

    run_job(args.package_site, args.checkpoint, args.world_size, args.dtype, args.prompts, args.out, probe.warm(),
            args.expert_parallel)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
