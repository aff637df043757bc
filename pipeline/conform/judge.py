"""The "loaded" level: what a probe dumped after the framework's own load_weights, against dayone's reference reading.

The reference is the weight map built from the spec for the target's layout, walked over the checkpoint for the
probe's tensor-parallel rank (`walk.to_target`): the parameters that rank must hold, bitwise. On top:
- every parameter the framework built is one the map fills (nothing left at its initial value unnoticed), and
  every parameter of the map was built;
- each weight loader was called exactly as often as the map has tensors for that parameter on that rank (a
  replicated fused parameter, MLA's q_a with kv_a, is written part by part by the table loader itself: no calls);
- load_weights consumed every checkpoint tensor except those the map passes through (a vision tower the text
  model does not hold);
- derived tensors equal their recomputation from the reference parameters, after the first load and after a second
  load with every floating-point checkpoint tensor doubled (a weight update).
Each problem is one line naming the tensor; the first few are reported.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import torch
from dayone.adapters.weightmap import walk
from safetensors.torch import load_file

LIMIT = 8


def judge_rank(table, tensors, rank: int, world: int, dump: Path, expert_parallel: bool = False) -> list[str]:
    """Problems of rank `rank`'s dump (empty: loaded right). tensors: checkpoint name -> tensor (lazy get).
    expert_parallel: the engine spread the routed experts over the ranks, each held whole (vLLM's and SGLang's expert
    parallelism at one data-parallel rank: the expert-parallel rank is the tensor-parallel one), instead of splitting
    every expert over them."""
    if expert_parallel:
        par = walk.Parallel(tp_rank=rank, tp_size=world, ep_rank=rank, ep_size=world, experts_whole=True)
    else:
        par = walk.Parallel(tp_rank=rank, tp_size=world)
    expected = _text_model(table, walk.to_target(table, tensors.__getitem__, par))
    got = load_file(str(dump / f"rank{rank}.safetensors"))
    problems = _values(expected, got, rank)
    record = json.loads((dump / f"rank{rank}.writes.json").read_text())
    problems += _writes(table, par, record, rank)
    problems += _consumed(set(tensors.keys()), record, expected)
    problems += _derived(table, expected, load_file(str(dump / f"rank{rank}.derived.safetensors")), "first load")
    doubled = _text_model(table, walk.to_target(table, lambda n: _double(tensors[n]), par))
    second = load_file(str(dump / f"rank{rank}.derived2.safetensors"))
    problems += _derived(table, doubled, second, "after a weight update")
    return problems


def _text_model(table, params: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The parameters without those the map passes through untouched (a vision tower the engine's text model does
    not build; the adapter's loader records those tensors as passed through)."""
    passthrough = {row.target for row in walk.rows(table) if row.rule.transform == "passthrough"}
    return {name: value for name, value in params.items() if name not in passthrough}


def _double(tensor: torch.Tensor) -> torch.Tensor:
    return tensor * 2 if tensor.is_floating_point() else tensor


def _values(expected: dict[str, torch.Tensor], got: dict[str, torch.Tensor], rank: int) -> list[str]:
    problems = []
    for name in sorted(set(expected) - set(got)):
        problems.append(f"{name}: in the weight map, but the model built no such parameter (rank {rank})")
    for name in sorted(set(got) - set(expected)):
        if _framework_state(name, got[name]):
            continue
        problems.append(f"{name}: a parameter of the built model that no checkpoint tensor fills (rank {rank})")
    for name in sorted(set(expected) & set(got)):
        want, have = expected[name], got[name]
        if tuple(want.shape) != tuple(have.shape):
            problems.append(f"{name}: shape {tuple(have.shape)} on rank {rank}, the map gives {tuple(want.shape)}")
        elif not torch.equal(want.to(have.dtype), have):
            diff = (want.to(have.dtype) != have).nonzero()
            where = tuple(int(i) for i in diff[0]) if len(diff) else ()
            problems.append(
                f"{name}: differs from the reference reading on rank {rank} ({len(diff)} elements, first at {where})"
            )
    return problems


def _framework_state(name: str, tensor: torch.Tensor) -> bool:
    """Buffers and scalars a framework keeps for itself (KV-cache scales, rotary caches), not checkpoint weights."""
    leaf = name.rsplit(".", 1)[-1]
    if leaf in ZERO_EXPERT_BIASES:
        return not bool(tensor.any())  # framework-owned only while nothing wrote it
    return leaf.startswith("_") or leaf in {"k_scale", "v_scale", "q_scale", "prob_scale", "cos_sin_cache"}


# SGLang's Mxfp4MoEMethod registers zero expert biases on every platform but ROCm, used only for a model with
# biased experts: without a checkpoint tensor they must stay zero.
ZERO_EXPERT_BIASES = ("w13_weight_bias", "w2_weight_bias")


def _writes(table, par: walk.Parallel, record: dict, rank: int) -> list[str]:
    want: Counter = Counter()
    for row in walk.rows(table):
        # FusedMoE's weight_loader is called for every expert and ignores those another rank holds
        stacked = row.param.experts == "stacked"
        if row.rule.transform == "passthrough" or not (stacked or walk.holds(table, row, par)):
            continue
        replicated_part = row.rule.part is not None and row.param.tp != "column" and row.param.experts != "stacked"
        name = walk.local_name(table, row, par)
        if replicated_part:
            want[name] = 1  # the loader gathers its parts and writes it whole, in one weight_loader call
        else:
            want[name] += 1
    calls = record["calls"]
    problems = []
    for name in sorted(set(want) | set(calls)):
        if name in calls and name in want and calls[name] != want[name]:
            problems.append(f"{name}: its weight loader ran {calls[name]} times on rank {rank}, expected {want[name]}")
    # Element by element, where the probe counts writes into each parameter's storage (SGLang's does).
    for name, count in sorted(record.get("params", {}).items()):
        if name in want and count["numel"] and not count["min"] == count["max"] == 1:
            problems.append(f"{name}: elements written {count['min']}..{count['max']} times on rank {rank}, not once")
    return problems


def _consumed(names: set[str], record: dict, expected: dict) -> list[str]:
    """Every checkpoint tensor reached load_weights (which raises on one it cannot place), and load_weights said it
    wrote every parameter the map fills."""
    left = sorted(names - set(record["streamed"]))
    problems = [f"{name}: a checkpoint tensor the framework never passed to load_weights" for name in left]
    unsaid = sorted(set(expected) - set(record["returned"]))
    return problems + [f"{name}: load_weights did not report writing this parameter" for name in unsaid]


def _derived(table, params: dict[str, torch.Tensor], got: dict[str, torch.Tensor], when: str) -> list[str]:
    problems = []
    for name, d, inputs in walk.derived_rows(table):
        if not all(i in params for i in inputs):
            continue
        want = walk.derive(d.kind, [params[i] for i in inputs], d.dims)
        if name not in got:
            problems.append(f"{name}: derived tensor missing on the model ({when})")
        elif tuple(got[name].shape) != tuple(want.shape) or not torch.equal(want.to(got[name].dtype), got[name]):
            problems.append(f"{name}: derived tensor differs from its recomputation ({when})")
    return problems


def first(problems: list[str]) -> str:
    more = f" (+{len(problems) - 1} more)" if len(problems) > 1 else ""
    return problems[0] + more
