"""The trainer side of one Miles RL iteration, in the megatron peer (one gloo rank, fp32).

    python -m dayone.programs.megatron.miles_trainer SPEC|FILE --package DIR --miles DIR --checkpoint DIR \
        --rollout ROLLOUT.json --out DIR [--layers N] [--lr LR]

--package is the generated Miles package (`integrate package`'s tree), --miles a Miles tree at the pinned commit
with the package's dispatch patch applied (the files Miles' converter entry runs: `miles_entry`), --checkpoint the
checkpoint the rollout engine serves, --rollout the engine's rollout (`vllm_rl_session.py`: prompts, sampled
responses). The package builds megatron-core's GPTModel from its arguments and `--spec` plugin and loads the
checkpoint (`convert.load_hf`). Then, as Miles does in an iteration:

1. weight sync: Miles' own `convert_to_hf(args, model_name, "module.module." + name, param)` over every parameter
   and buffer must give the checkpoint's tensor names and bytes;
2. the training model's log-probs of each prompt + response (eval, no grad): Miles' `log_probs`, which its
   train_rollout_logprob_abs_diff compares with the engine's;
3. one SGD step on those sequences (mean of the per-sequence next-token cross-entropy, `train_step.loss_of`);
4. the updated model's log-probs of the same sequences, and its weights through the converter entry again, written
   to OUT/refit.safetensors (renamed into place last: the engine session waits for it).

Writes OUT/trainer.json: {"failures", "synced_tensors", "before", "after" (per sequence: log p of every token after
the first), "loss", "tensors_moved", "seconds"}.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import time
from argparse import Namespace
from pathlib import Path

import torch
import torch.nn.functional as F


@torch.no_grad()
def logprobs(model, sequences: list[list[int]]) -> list[list[float]]:
    """Per sequence: log p(token t | tokens < t) for t >= 1 (fp32 log-softmax of [1, s, V] logits)."""
    model.eval()
    out = []
    for seq in sequences:
        ids = torch.tensor([seq])
        logits = model(ids, position_ids=None, attention_mask=None)
        out.append(F.log_softmax(logits[0, :-1].float(), dim=-1).gather(1, ids[0, 1:, None])[:, 0].tolist())
    return out


def sgd_step(model, sequences: list[list[int]], lr: float) -> float:
    from dayone.programs.megatron.train_step import loss_of

    model.train()
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    optimizer.zero_grad()
    loss = sum(loss_of(model(torch.tensor([s]), position_ids=None, attention_mask=None), torch.tensor([s]))
               for s in sequences) / len(sequences)  # fmt: skip
    loss.backward()
    optimizer.step()
    return float(loss)


def synced(model, convert_to_hf, model_name: str, vocab_size: int, names: set[str]) -> dict[str, torch.Tensor]:
    """The model's parameters and buffers through Miles' converter entry, named as its weight sync names them."""
    args = Namespace(vocab_size=vocab_size)  # what remove_padding reads
    out: dict[str, torch.Tensor] = {}
    for name, value in list(model.named_parameters()) + list(model.named_buffers()):
        if name in names:
            # a copy: the converter may return views of the parameter, which the step then changes
            out.update(dict(convert_to_hf(args, model_name, f"module.module.{name}", value.detach().clone())))
    return out


def read_checkpoint(folder: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    tensors: dict[str, torch.Tensor] = {}
    for shard in sorted(folder.glob("*.safetensors")):
        tensors |= load_file(shard)
    return tensors


def run(args) -> dict:
    import torch.distributed as dist
    from dayone.adapters.megatron.cpu import install_cpu_standins
    from dayone.adapters.megatron.miles_entry import miles_convert_to_hf
    from dayone.adapters.targets import common, miles
    from dayone.programs.megatron.check_miles import config_from_args, gpt_model
    from dayone.programs.megatron.same_bytes import weight_sync_failures
    from dayone.programs.megatron.train_step import stand_in
    from dayone.programs.megatron.verify import _free_port
    from megatron.core import parallel_state as ps

    os.environ |= {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(_free_port())}
    dist.init_process_group("gloo", rank=0, world_size=1)
    ps.initialize_model_parallel(1, 1)
    install_cpu_standins()
    spec = stand_in(args.spec, args.layers)
    package = common.package_name(spec, "miles")
    sys.path.insert(0, str(args.package))
    plugin = importlib.import_module(f"{package}.plugin")
    convert = importlib.import_module(f"{package}.convert")
    convert_to_hf = miles_convert_to_hf(args.miles)
    report: dict = {"spec": spec.name, "model_name": miles.model_name(spec), "failures": [], "seconds": {}}

    margs = [(f, v) for f, v in miles.model_args(spec) if v is not None and v is not False]
    kwargs, _ = config_from_args(margs, miles)
    torch.manual_seed(0)
    model = gpt_model(spec, getattr(plugin, dict(margs)["spec"].split()[1]), kwargs)
    tensors = read_checkpoint(args.checkpoint)
    state = convert.load_hf(tensors.__getitem__, dtype=torch.float32)
    passthrough = {r.target for r in convert.weight_table.RULES if r.transform == "passthrough"}
    model.load_state_dict({n: v for n, v in state.items() if n not in passthrough}, strict=False)
    names = {n for n in model.state_dict() if not n.endswith("._extra_state")}

    start = time.perf_counter()
    first = synced(model, convert_to_hf, report["model_name"], spec.vocab_size, names)
    report["seconds"]["sync"] = round(time.perf_counter() - start, 3)
    expected = {n for n in tensors if n not in passthrough}
    report["failures"] += weight_sync_failures(first, tensors, expected)
    report["synced_tensors"] = len(first)

    rollout = json.loads(args.rollout.read_text())["requests"]
    sequences = [r["prompt"] + r["response"] for r in rollout]
    report["before"] = logprobs(model, sequences)
    start = time.perf_counter()
    report["loss"] = sgd_step(model, sequences, args.lr)
    report["seconds"]["step"] = round(time.perf_counter() - start, 3)
    report["after"] = logprobs(model, sequences)
    updated = synced(model, convert_to_hf, report["model_name"], spec.vocab_size, names)
    report["tensors_moved"] = sum(not torch.equal(updated[n].float(), first[n].float()) for n in updated)
    if not report["failures"]:
        from safetensors.torch import save_file

        partial = args.out / "refit.safetensors.partial"
        save_file({n: v.float().contiguous() for n, v in updated.items()}, str(partial))
        partial.rename(args.out / "refit.safetensors")
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("spec")
    parser.add_argument("--package", type=Path, required=True)
    parser.add_argument("--miles", type=Path, required=True)
    parser.add_argument("--checkpoint", type=Path, required=True)
    parser.add_argument("--rollout", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--layers", type=int)
    parser.add_argument("--lr", type=float, default=0.5)
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    report = run(args)
    (args.out / "trainer.json").write_text(json.dumps(report, indent=1))
    return 1 if report["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
