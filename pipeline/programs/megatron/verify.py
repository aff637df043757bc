"""Checks of the Megatron model against the weight map and dayone's reference tier, run with megatron-core on gloo.

    python -m dayone.programs.megatron.verify SPEC|FILE --world-size 2 --tp 2 --ep 2 [--layers N]

On each rank: build the model of the spec at tiny scale; its state (parameters and persistent buffers) must be
exactly the weight map's Megatron side for that rank; a synthetic release-format checkpoint (MXFP4 experts as the
release stores them) is loaded through the map; rank 0 gathers every rank's tensors and converts them back to the
checkpoint, which must be bitwise the original. Then per-token log-probs of a batch against the reference tier
(`dayone.adapters.model`, fp32), the vocab-parallel logits gathered; at TP 1 with autograd on, a backward pass whose
gradients must be finite, and non-zero for every parameter that can receive one (see `untrainable`); and the
train/rollout parity Miles gates on (`_train_rollout`), measured in this model.
Prints one JSON report; exit 1 when a check fails, each failure named.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import tempfile
from pathlib import Path

import torch
import torch.nn.functional as F

LOGPROB_LIMIT = 1e-5  # fp32 on a tiny model: the train/rollout bound Miles gates on


def covering_layers(spec) -> int:
    """The shortest prefix of the layout with every attention kind, every FFN kind and two layers at least."""
    kinds = {(layer.attention) for layer in spec.layers} | {layer.ffn for layer in spec.layers}
    seen: set[str] = set()
    for layer in spec.layers:
        seen |= {layer.attention, layer.ffn}
        if seen == kinds:
            return max(layer.index + 1, 2)
    return spec.num_layers


def tiny_stand_in(full, layers: int | None = None):
    """The tiny-scale copy of `full` the checks build, cut to `layers` (default: the shortest covering prefix).
    Grouped routing keeps the spec's top-k and enough whole groups for it: the tiny scale's top-2 of 2 groups would
    rank groups by their single best score where the spec ranks them by their best two, a routing megatron-core
    cannot express (config.router_refusals), so the tiny model would check a different router than the target's."""
    from dayone.spec.registry import spec_to_dict
    from dayone.spec.schema import ModelSpec
    from dayone.synth import scaled_spec
    from dayone.synth.faithful import routing_minimum

    spec = scaled_spec(full, "tiny", layers or covering_layers(full))
    if full.moe is None or full.moe.router.num_groups <= 1:
        return spec
    data = spec_to_dict(spec)
    data["moe"].update(experts_per_token=full.moe.experts_per_token, num_experts=routing_minimum(full))
    return ModelSpec.model_validate(data)


def generated_package(spec, target: str, files: dict[str, str], folder: Path) -> str:
    """Write a target's generated package (`files`, as its adapter makes them) under `folder`, put the folder on
    sys.path and return the package's import name."""
    from dayone.adapters.targets import common

    common.write_tree(folder, files)
    sys.path.insert(0, str(folder))
    return common.package_name(spec, target)


def bridge_import() -> str:
    """Whether megatron-bridge imports here; if not, the exact import that needs a package this machine lacks."""
    import traceback

    try:
        import megatron.bridge  # noqa: F401
    except ImportError as err:
        frame = traceback.extract_tb(err.__traceback__)[-1]
        where = frame.filename.split("/megatron/bridge/")[-1]
        return f"not run: import megatron.bridge needs {err.name} (megatron/bridge/{where}:{frame.lineno})"
    return "ok"


def synthetic_checkpoint(spec, folder: Path) -> dict[str, torch.Tensor]:
    """The release-format checkpoint dayone's synth writes (sharded safetensors, MXFP4 experts), read back."""
    from dayone.synth import write_synthetic
    from safetensors.torch import load_file

    write_synthetic(spec, folder, seed=7)
    tensors: dict[str, torch.Tensor] = {}
    for shard in sorted(folder.glob("*.safetensors")):
        tensors |= load_file(shard)
    return tensors


def untrainable(spec, received: dict[str, torch.Tensor]) -> set[str]:
    """Parameters that get no gradient on this rank by construction: the first layer's attention-residual mix (a
    softmax over one row) and the local experts that received no token here (`received`: experts module name ->
    tokens per local expert; other ranks' copies of an expert are summed by the data-parallel reduction)."""
    out = set()
    if spec.residual.kind == "attention":
        out |= {"decoder.layers.0.attn_res.norm.weight", "decoder.layers.0.attn_res.proj.weight"}
    for experts, counts in received.items():
        for e in torch.nonzero(counts == 0).flatten().tolist():
            out |= {f"{experts}.linear_fc1.weight{e}", f"{experts}.linear_fc2.weight{e}"}
    return out


# Mistakes the checks must catch (tests plant them): a mapping to a parameter the model lacks, a layer kind with no
# layer spec.
PLANTS = ("mapping", "layer-kind")


def plant_mistake(plant: str) -> None:
    from dayone.adapters.megatron import layer_specs
    from dayone.adapters.weightmap import layouts

    if plant == "mapping":
        layouts.MEGATRON_LAYER["kda.b_proj"] = ("self_attention.b_proj.weight", None)
    elif plant == "layer-kind":
        layer_specs.ATTENTION_SPECS.pop("kda")


def rank_main(rank: int, world: int, tp: int, ep: int, spec_name: str, layers: int, folder: str, port: int,
              plant: str | None = None) -> None:  # fmt: skip
    import torch.distributed as dist

    os.environ |= {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}
    dist.init_process_group("gloo", rank=rank, world_size=world)
    from dayone.adapters.megatron import build_model
    from dayone.adapters.model import SpecModel, WeightLoader
    from dayone.adapters.weightmap import build_weight_map, walk
    from dayone.programs.megatron.same_bytes import same_bytes
    from dayone.spec.registry import load_spec
    from megatron.core import parallel_state as ps

    ps.initialize_model_parallel(tp, 1, expert_model_parallel_size=ep, expert_tensor_parallel_size=1)
    full = load_spec(spec_name)
    spec = tiny_stand_in(full, layers)
    report: dict = {"spec": spec.name, "layers": spec.num_layers, "world_size": world, "tp": tp, "ep": ep,
                    "failures": []}  # fmt: skip
    fail = report["failures"].append

    if plant:
        plant_mistake(plant)
    torch.manual_seed(0)
    try:
        # TP > 1 trains with sequence parallelism, as megatron-core requires of MoE layers under tensor parallelism
        model = build_model(spec, tensor_parallel=tp, expert_parallel=ep, sequence_parallel=tp > 1)
    except ValueError as e:  # a layout the layer specs cannot build, named
        fail(str(e).split(" when instantiating")[0])
        return _finish(report, rank, folder)
    tensors = synthetic_checkpoint(spec, Path(folder) / "checkpoint") if rank == 0 else None
    holder = [tensors]
    dist.broadcast_object_list(holder, src=0)
    tensors = holder[0]
    table = build_weight_map(spec, "megatron", mxfp4="dequantize")
    par = walk.Parallel(ps.get_tensor_model_parallel_rank(), tp, ps.get_expert_model_parallel_rank(), ep)
    state = walk.to_target(table, tensors.__getitem__, par, dtype=torch.float32)
    # tensors the language model does not use (a vision tower) pass through training untouched
    passthrough = {r.target for r in table.RULES if r.transform == "passthrough"}
    kept = {n: v for n, v in state.items() if n in passthrough}
    state = {n: v for n, v in state.items() if n not in passthrough}
    report_passthrough = len(kept)
    have = {n for n in model.state_dict() if not n.endswith("._extra_state")}
    params = {n for n, _ in model.named_parameters()}
    for name in sorted(have - set(state)):
        fail(f"rank {rank}: {name} is a tensor of the Megatron model the weight map does not map")
    for name in sorted(set(state) - have):
        fail(f"rank {rank}: the weight map maps {name}, which the Megatron model does not have")
    report["parameters"] = len(params)
    report["passthrough_tensors"] = report_passthrough
    report["buffers_mapped"] = sorted(have - params)[:4]
    if report["failures"]:
        return _finish(report, rank, folder)
    model.load_state_dict(state, strict=False)
    loaded = model.state_dict()
    for name, value in state.items():
        if not torch.equal(loaded[name], value):
            fail(f"rank {rank}: {name} differs after load_state_dict")

    # round trip: every rank's parameters back to the checkpoint on rank 0
    mine = {n: loaded[n].detach().clone() for n in state} | kept
    gathered = [None] * world
    dist.all_gather_object(gathered, (par.tp_rank, par.ep_rank, mine))
    if rank == 0:
        # the map's grid of (TP rank, EP rank) shards from the world's ranks: dense tensors from the rank with that
        # TP rank, experts (whole, spread by EP) from the rank with that EP rank
        by_tp = {t: s for t, _, s in gathered}
        by_ep = {e: {n: v for n, v in s.items() if ".mlp.experts." in n} for _, e, s in gathered}
        shards = {(t, e): by_tp[t] | by_ep[e] for t in range(tp) for e in range(ep)}
        back = walk.to_hf(table, shards, walk.Parallel(0, tp, 0, ep))
        # the model holds fp32; fp32 -> the checkpoint's dtype is exact for values that came from it
        wrong = [n for n in tensors if n not in back or not same_bytes(back[n].to(tensors[n].dtype), tensors[n])]
        report["round_trip_tensors"] = len(tensors)
        for name in wrong[:5]:
            fail(f"round trip: {name} is not bitwise the checkpoint's")

    ids = torch.randint(3, spec.vocab_size, (2, 10), generator=torch.Generator().manual_seed(1))  # s % TP == 0
    received: dict[str, torch.Tensor] = {}
    for name, module in model.named_modules():
        if name.endswith("mlp.experts"):  # called as (tokens, tokens_per_expert, probs)
            module.register_forward_pre_hook(
                lambda m, args, name=name: received.__setitem__(name, args[1] + received.get(name, 0))
            )
    model.train()
    logits = model(ids, position_ids=None, attention_mask=None)
    full = _gather_vocab(logits, tp)
    logp = F.log_softmax(full.float(), -1)
    lp = logp[:, :-1].gather(-1, ids[:, 1:, None])[..., 0]
    if rank == 0:
        ref = SpecModel(spec, "reference")
        WeightLoader(spec, tensors.__getitem__).load(ref)
        with torch.no_grad():
            rl = ref(ids)
        rp = F.log_softmax(rl.float(), -1)[:, :-1].gather(-1, ids[:, 1:, None])[..., 0]
        diff = (lp.detach() - rp).abs()
        report["logprob_abs_diff_mean"] = float(diff.mean())
        report["logprob_abs_diff_max"] = float(diff.max())
        report["tokens"] = int(diff.numel())
        if not diff.max() < LOGPROB_LIMIT:
            fail(f"per-token log-probs differ from the reference tier by {float(diff.max()):.3g} > {LOGPROB_LIMIT}")
    # every position's output in the loss (the last one predicts a wrapped-around token), so every routed token's
    # experts get a gradient
    (-logp.gather(-1, ids.roll(-1, dims=1)[..., None]).sum()).backward()
    skip = untrainable(spec, received)
    report["gradients_checked"] = 0
    for name, p in model.named_parameters():
        g = p.grad
        if g is not None and not torch.isfinite(g).all():
            fail(f"rank {rank}: {name} has a non-finite gradient")
        elif name not in skip and (g is None or not g.abs().sum() > 0):
            fail(f"rank {rank}: {name} gets no gradient")
        else:
            report["gradients_checked"] += 1
    report["no_gradient_by_construction"] = len(skip)
    _train_rollout(model, spec, tensors, tp, rank, report)
    _finish(report, rank, folder)


def _train_rollout(model, spec, tensors, tp: int, rank: int, report: dict) -> None:
    """Train/rollout parity as Miles gates RL on it: the rollout engine (the reference tier, prefill + cached
    decode) samples responses, the Megatron model re-scores prompt + response packed into one sequence (THD, as Miles
    trains), the responses' log-probs compared."""
    import torch.distributed as dist
    from dayone.adapters.rl import rl_metrics, rollout

    shared = [None]
    if rank == 0:
        gen = torch.Generator().manual_seed(5)
        prompts = [torch.randint(3, spec.vocab_size, (n,), generator=gen) for n in (6, 4)]  # with 4: s % TP == 0
        ro = rollout(spec, tensors, prompts, response_len=4)
        shared = [(ro.sequences(), ro.prompts, ro.logprobs)]
    dist.broadcast_object_list(shared, src=0)
    sequences, prompts, rollout_lp = shared[0]
    from megatron.core.packed_seq_params import PackedSeqParams

    lengths = [len(seq) for seq in sequences]
    cu = torch.tensor([0, *torch.tensor(lengths).cumsum(0).tolist()], dtype=torch.int32)
    packed = PackedSeqParams(qkv_format="thd", cu_seqlens_q=cu, cu_seqlens_kv=cu, max_seqlen_q=max(lengths),
                             max_seqlen_kv=max(lengths))  # fmt: skip
    model.eval()
    with torch.no_grad():
        ids = torch.cat(sequences)[None]
        logits = _gather_vocab(model(ids, position_ids=None, attention_mask=None, packed_seq_params=packed), tp)[0]
    train_lp = []
    for seq, start in zip(sequences, cu.tolist()):
        rows = logits[start : start + len(seq) - 1]
        train_lp.append(F.log_softmax(rows.float(), -1).gather(-1, seq[1:, None])[:, 0])
    if rank == 0:
        metrics = rl_metrics([t[len(p) - 1 :] for t, p in zip(train_lp, prompts)], rollout_lp)
        report |= {f"megatron_{name}": value for name, value in metrics.items()}
        if not metrics["train_rollout_logprob_abs_diff_max"] < LOGPROB_LIMIT:
            worst = metrics["train_rollout_logprob_abs_diff_max"]
            report["failures"].append(f"train/rollout log-probs differ by {worst:.3g} > {LOGPROB_LIMIT} in Megatron")


def _gather_vocab(logits: torch.Tensor, tp: int) -> torch.Tensor:
    """The vocab-parallel logits [b, s, V / TP] of every TP rank joined (autograd-aware: backward takes this rank's)."""
    if tp == 1:
        return logits
    from megatron.core.tensor_parallel.mappings import gather_from_tensor_model_parallel_region

    return gather_from_tensor_model_parallel_region(logits)


def _finish(report: dict, rank: int, folder: str) -> None:
    Path(folder, f"rank{rank}.json").write_text(json.dumps(report))
    _leave_group()


def _leave_group() -> None:
    """Gloo shut down before the rank goes on or exits: left to interpreter exit, its teardown can abort (the
    bridge round trip's ranks did, rarely)."""
    import torch.distributed as dist

    if dist.is_initialized():
        dist.destroy_process_group()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def verify(
    spec_name: str, world: int = 1, tp: int = 1, ep: int = 1, layers: int | None = None, plant: str | None = None
) -> dict:
    """Run the checks on `world` gloo ranks; the merged report (failures of every rank)."""
    import torch.multiprocessing as mp

    with tempfile.TemporaryDirectory() as folder:
        args = (world, tp, ep, spec_name, layers, folder, _free_port(), plant)
        if world == 1:  # the one rank in this process: a spawned interpreter imports torch and megatron again (3 s)
            rank_main(0, *args)
        else:
            mp.spawn(rank_main, args=args, nprocs=world)
        reports = [json.loads(Path(folder, f"rank{r}.json").read_text()) for r in range(world)]
    merged = reports[0]
    merged["failures"] = [f for r in reports for f in r["failures"]]
    merged["megatron_bridge_import"] = bridge_import()
    return merged


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("spec")
    parser.add_argument("--world-size", type=int, default=1)
    parser.add_argument("--tp", type=int, default=1)
    parser.add_argument("--ep", type=int, default=1)
    parser.add_argument("--layers", type=int, help="the tiny model's layers (default: the shortest covering prefix)")
    parser.add_argument("--plant", choices=PLANTS, help="plant a mistake the checks must report (tests)")
    args = parser.parse_args(argv)
    report = verify(args.spec, args.world_size, args.tp, args.ep, args.layers, args.plant)
    print(json.dumps(report, indent=1))
    return 1 if report["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
