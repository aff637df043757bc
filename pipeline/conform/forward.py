"""Conformance level "forward": the engine's greedy generation judged against dayone's reference tier.

    prompts = engine_prompts(spec.vocab_size)                      # written for the engine's probe
    level = judge_forward(result, References(checkpoint, spec), dtype, layers)  # result: the probe's forward.json

The engine generates greedily from a few prompts of different lengths, returning the log-prob of every prompt token
(teacher forcing) and of every token it chose. The reference tier runs each finished sequence (prompt and
completion) in fp32 and gives its log-probs at the same positions. Judged:
- fp32 engine: every generated token is the reference's argmax after the engine's own prefix (identical greedy
  tokens), and every log-prob is within the fp32_logprob row (1e-4) of the reference's.
- bf16 engine: the mean |log-prob diff| is judged like validate's un-replayed
  figures: within max(table bound, k x the noise floor), the floor being the reference tier's arithmetic in bf16 on
  the same sequences (dayone.validate.floor).
When the level fails and the engine recorded its decoder layers' outputs (the first step's prefill), the report names
the first layer whose output leaves the fp32 row against the reference's `layers.{i}.out` capture point.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path

import torch
from dayone.checkpoint.reader import Checkpoint
from dayone.conform.results import Level
from dayone.core.numerics import TOLERANCES, compare
from dayone.core.vocabulary import Point, layer_point
from dayone.spec.schema import ModelSpec
from dayone.validate.floor import FLOOR_K, FLOOR_TIER

PROMPT_LENGTHS = (5, 12, 9)  # one more than the engine runs at once: the last is prefilled while others decode
MAX_TOKENS = (6, 3, 5)
PROMPT_SEED = 20261203
FP32_ROW = "fp32_logprob"
# A bf16 greedy flip where the reference prefers its own token by at most this (nats: the largest log-prob gap
# between two bf16 stacks Miles' K3 prune measured, the bf16_logprob_max row) is a near-tie that bf16 rounding alone
# can flip (a router near-tie upstream, seen in SGLang's Kimi Linear run); the report counts the two kinds apart.
NEAR_TIE = TOLERANCES["bf16_logprob_max"].max_abs


def engine_prompts(vocab_size: int) -> list[dict]:
    """The requests every engine forward runs: fixed ids for a vocabulary size."""
    gen = torch.Generator().manual_seed(PROMPT_SEED)
    return [
        {"prompt": torch.randint(0, vocab_size, (n,), generator=gen).tolist(), "max_tokens": m}
        for n, m in zip(PROMPT_LENGTHS, MAX_TOKENS, strict=True)
    ]


@dataclass
class ReferenceRun:
    """The reference tier on one finished sequence: log-probs [T, vocab] fp64 and each layer's output [T, D]."""

    logprobs: torch.Tensor
    layers: dict[int, torch.Tensor]


class References:
    """The reference tier's runs of finished sequences on one checkpoint, each (tier, sequences) computed once: the
    engine's fp32 runs at every world size usually finish the same sequences, and each would rerun every layer."""

    def __init__(self, checkpoint: Checkpoint, spec: ModelSpec) -> None:
        self.checkpoint, self.spec = checkpoint, spec
        self._runs: dict[tuple, list[ReferenceRun]] = {}

    def runs(self, sequences: list[list[int]], tier="reference") -> list[ReferenceRun]:
        key = (str(tier), tuple(map(tuple, sequences)))
        if key not in self._runs:
            self._runs[key] = reference_runs(self.checkpoint, self.spec, sequences, tier)
        return self._runs[key]


def reference_runs(checkpoint: Checkpoint, spec: ModelSpec, sequences: list[list[int]], tier="reference"):
    """Each sequence through dayone's reference tier (streamed part by part, fp32 unless `tier` says otherwise). The
    sequences go through together, packed as an engine batches requests, so each part's weights are read once: run
    one by one, the README run's three sequences read its 93 layers three times (23 s of its conformance's CPU)."""
    from dayone.adapters.model import Capture
    from dayone.spec.manifest import build_manifest
    from dayone.validate.source import ShardReader
    from dayone.validate.streamed import StreamedModel

    model = StreamedModel(spec, tier, ShardReader(checkpoint), build_manifest(spec), torch.device("cpu"))
    model.embed_requests(sequences)
    layers = []
    for i in range(spec.num_layers):
        cap = Capture(layer_point(i, Point.OUT))
        model.layer(i, cap)
        layers.append(cap[layer_point(i, Point.OUT)].double())
    logprobs = torch.log_softmax(model.head().double(), -1)
    assert model.batch is not None
    return [
        ReferenceRun(logprobs[start:end], {i: out[start:end] for i, out in enumerate(layers)})
        for _, start, end in model.batch.spans()
    ]


def _chosen(run: ReferenceRun, sequence: list[int]) -> torch.Tensor:
    """The log-prob [T - 1] a run gives each token of `sequence` after the first."""
    targets = torch.tensor(sequence[1:])
    return run.logprobs[:-1].gather(-1, targets[:, None])[:, 0]


def _figures(sequences, prompt_lengths, candidate, choices, runs: list[ReferenceRun]) -> dict:
    """candidate: per sequence the log-probs [T - 1] of its tokens after the first; choices: per sequence the token
    the candidate would pick at each position [T - 1] (None: the sequence's own tokens, which the engine chose).
    Returns max / mean |log-prob diff| against `runs`, and at how many generated positions the candidate's choice
    is not the reference's argmax."""
    diffs, flips, decisive, generated_total = [], 0, 0, 0
    for n, (sequence, prompt_length, run) in enumerate(zip(sequences, prompt_lengths, runs, strict=True)):
        diffs.append((torch.as_tensor(candidate[n], dtype=torch.float64) - _chosen(run, sequence)).abs())
        picked = torch.tensor(sequence[1:]) if choices is None else choices[n]
        logprobs = run.logprobs[:-1]
        best = logprobs.argmax(-1)
        generated = slice(prompt_length - 1, len(sequence) - 1)
        missed = picked[generated] != best[generated]
        # how far below the reference's own choice the picked token sits: a near-tie that bf16 may flip, or not
        margin = logprobs.max(-1).values[generated] - logprobs[generated].gather(-1, picked[generated, None])[:, 0]
        flips += int(missed.sum())
        decisive += int((missed & (margin > NEAR_TIE)).sum())
        generated_total += len(sequence) - prompt_length
    every = torch.cat(diffs)
    return {
        "logprob_max_abs": float(every.max()),
        "logprob_mean_abs": float(every.mean()),
        "positions": int(every.numel()),
        "greedy_tokens": generated_total,
        "greedy_disagreement": flips,
        "greedy_disagreement_beyond_near_ties": decisive,
    }


def judge_forward(result: dict, references: References, dtype: str, layers: Path | None) -> Level:
    """The forward level from the probe's forward.json (`result`) and its layers.safetensors (`layers`)."""
    if result.get("status") != "ran":
        return Level(status="fail", detail=result.get("detail") or "the engine did not generate")
    requests = result["requests"]
    sequences = [r["prompt"] + r["output"] for r in requests]
    prompt_lengths = [len(r["prompt"]) for r in requests]
    engine = [r["prompt_logprobs"][1:] + r["output_logprobs"] for r in requests]
    runs = references.runs(sequences)
    figures = _figures(sequences, prompt_lengths, engine, None, runs) | _speed(result)
    if not result["engine"].get("prefix_caching"):
        figures["prefix_caching"] = result["engine"].get("prefix_caching_reason", "off")
    if dtype == "float32":
        bound = TOLERANCES[FP32_ROW].max_abs
        passed = figures["greedy_disagreement"] == 0 and figures["logprob_max_abs"] <= bound
        verdict = (
            f"fp32: {figures['greedy_tokens'] - figures['greedy_disagreement']}/{figures['greedy_tokens']} greedy "
            f"tokens the reference's, log-prob max abs {figures['logprob_max_abs']:.2e} (bound {bound:g})"
        )
    else:
        floor_runs = references.runs(sequences, tier=FLOOR_TIER)
        floor_lp = [_chosen(run, seq) for run, seq in zip(floor_runs, sequences, strict=True)]
        floor = _figures(sequences, prompt_lengths, floor_lp, [r.logprobs[:-1].argmax(-1) for r in floor_runs], runs)
        passed, verdict = _bf16_verdict(figures, floor)
    what = result.get("what") or "vllm.LLM greedy generation"  # the probe says what ran (SGLang: no scheduler)
    detail = (
        f"{what}, {len(sequences)} requests, {figures['positions']} positions; {verdict}; "
        f"{figures['prefill_tokens_per_s']:.1f} prefill tok/s, {figures['decode_tokens_per_s']:.1f} decode tok/s"
    )
    if not passed and layers is not None and layers.is_file():
        where = first_differing_layer(layers, runs)
        figures["first_differing_layer"] = where
        detail += f"; first layer that differs: {where}"
    return Level(status="pass" if passed else "fail", detail=detail, figures=figures)


def _bf16_verdict(figures: dict, floor: dict) -> tuple[bool, str]:
    """validate's un-replayed rule on the mean |log-prob diff|: within max(table bound, k x the floor's). Greedy
    flips are shown beside it, not judged: over a dozen generated tokens a count cannot tell one bf16 near-tie flip
    (which the engine's thread count alone changes from run to run) from a defect, and the fp32 run judges every
    token exactly."""
    value, floor_value = figures["logprob_mean_abs"], floor["logprob_mean_abs"]
    bound = max(TOLERANCES["bf16_logprob_mean"].max_abs, FLOOR_K * floor_value)
    figures["logprob_mean_abs_floor"] = floor_value
    figures["greedy_disagreement_floor"] = floor["greedy_disagreement"]
    flips = f"{figures['greedy_disagreement']}/{figures['greedy_tokens']} greedy tokens not the reference's"
    near = figures["greedy_disagreement"] - figures["greedy_disagreement_beyond_near_ties"]
    return value <= bound, (
        f"bf16 against the noise floor: logprob_mean_abs {value:.3g} (bound {bound:.3g}, floor {floor_value:.3g}); "
        f"{flips} ({near} within a near-tie; floor {floor['greedy_disagreement']}), shown, not judged"
    )


def _speed(result: dict) -> dict:
    seconds, tokens = result["seconds"], result["tokens"]
    decode_s = max(seconds["generate"] - seconds["prefill"], 1e-9)
    return {
        "prefill_tokens_per_s": tokens["prefill"] / max(seconds["prefill"], 1e-9),
        "decode_tokens_per_s": tokens["decode"] / decode_s,
    }


def first_differing_layer(layers: Path, runs: list[ReferenceRun]) -> str:
    """The first decoder layer whose output (the engine's first step) leaves the fp32 row, with its figures."""
    from safetensors.torch import load_file

    engine = load_file(str(layers))
    positions = engine["positions"].tolist()
    starts = [t for t, p in enumerate(positions) if p == 0] + [len(positions)]
    spans = list(pairwise(starts))
    for i in sorted(int(k.split(".")[1]) for k in engine if k.startswith("layers.")):
        ours = engine[f"layers.{i}"]
        for n, (s, e) in enumerate(spans):
            expected = runs[n].layers[i][: e - s]
            c = compare(ours[s:e], expected, "fp32")
            if not c.passed:
                return f"layers.{i} (request {n}: max_abs {c.max_abs:.2e}, rel_rms {c.rel_rms:.2e})"
    return "none: every recorded layer output is within the fp32 row"
