"""The metrics of a validation, every verdict through `dayone.core.numerics.compare` and its tolerance table.

Tensors at a capture point: compare(candidate, reference, row) -> max-abs, relative RMS, cosine.
Scalars whose ideal value is 0 (a log-prob difference, a KL divergence, a disagreement fraction) are judged as
compare(tensor(value), tensor(0), row), i.e. against the row's max_abs bound.
Which rows apply depends on the precision of the two sides (`rows_for`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from dayone.core.numerics import TOLERANCES, compare


@dataclass(frozen=True)
class Rows:
    """The tolerance-table rows one comparison class is judged by."""

    activations: str
    logprob_mean: str
    logprob_p95: str
    logprob_max: str
    kl: str
    top1: str
    topk: str

    def bounds(self) -> dict[str, dict]:
        return {field: {"row": row, **TOLERANCES[row].__dict__} for field, row in self.__dict__.items()}


# Everything past the activations row of an fp32 comparison: one log-prob row for mean, p95 and max alike.
FP32_BEYOND_ACTIVATIONS = ("fp32_logprob",) * 3 + ("fp32_kl", "fp32_top1_disagreement", "fp32_topk_disagreement")
ROWS = {
    # bf16 on either side: the fast tier against the fp32 truth (or a fast-tier golden).
    "bf16": Rows(
        "bf16_model",
        "bf16_logprob_mean",
        "bf16_logprob_p95",
        "bf16_logprob_max",
        "bf16_kl",
        "bf16_top1_disagreement",
        "bf16_topk_disagreement",
    ),
    # fp32 against fp32 from the same code (the reference tier against a reference-tier golden).
    "fp32": Rows("fp32", *FP32_BEYOND_ACTIVATIONS),
    # fp32 against an independent fp32 implementation (transformers' kimi_linear).
    "fp32_oracle": Rows("fp32_oracle", *FP32_BEYOND_ACTIVATIONS),
}


def rows_for(candidate_tier: str, reference_precision: str, independent: bool) -> tuple[str, Rows]:
    """(class name, rows) for a candidate tier against a reference of `reference_precision` ("fp32" | "bf16")."""
    if candidate_tier != "reference" or reference_precision != "fp32":
        return "bf16", ROWS["bf16"]
    name = "fp32_oracle" if independent else "fp32"
    return name, ROWS[name]


def judge_scalar(value: float, row: str) -> bool:
    return compare(torch.tensor(float(value)), torch.tensor(0.0), row).passed


def tensor_row(capture: str, layer: int, candidate: torch.Tensor, reference: torch.Tensor, row: str) -> dict:
    """One numerics row: the metrics of a capture point (the dashboard draws capture, layer, rel_rms)."""
    if candidate.shape != reference.shape:
        reference = reference.reshape(candidate.shape)
    c = compare(candidate, reference, row)
    return {"capture": capture, "layer": layer, "max_abs": c.max_abs, "rel_rms": c.rel_rms, "cosine": c.cosine,
            "nonfinite_agree": c.nonfinite_agree, "tolerance": row, "passed": c.passed}  # fmt: skip


def topk_disagreement(own: torch.Tensor, reference: torch.Tensor) -> float:
    """Fraction of (token, slot) choices in `own` that the reference did not make. own, reference: [N, k] ids.
    Counted, then divided, so that m misses in n choices is exactly the fraction a bound like 0.05 is written as."""
    num = int(max(own.max(), reference.max())) + 1
    a = torch.zeros(own.shape[0], num).scatter_(1, own.long().cpu(), 1.0)
    b = torch.zeros(own.shape[0], num).scatter_(1, reference.long().cpu(), 1.0)
    return (own.numel() - int((a * b).sum())) / own.numel()


def topk_row(layer: int, own: torch.Tensor, reference: torch.Tensor, row: str) -> dict:
    miss = topk_disagreement(own, reference)
    return {"layer": layer, "agreement": 1 - miss, "tolerance": row, "passed": judge_scalar(miss, row)}


def logprob_metrics(
    candidate_logits: torch.Tensor, reference_logprobs: torch.Tensor, ids: torch.Tensor, rows: Rows
) -> dict:
    """Log-prob metrics under teacher forcing. candidate_logits, reference_logprobs [B, T, V]; ids [B, T].

    abs diff: |log p_cand(x_{t+1}) - log p_ref(x_{t+1})| over next-token positions (Miles' train_rollout_logprob_abs_diff);
    KL(ref || cand) and top-1 agreement over every position's whole distribution.
    """
    lc = torch.log_softmax(candidate_logits.double(), -1)
    lr = reference_logprobs.double()
    B, T, _ = lc.shape
    if T > 1:
        target = ids[:, 1:, None].to(lc.device)
        diff = (lc[:, :-1].gather(-1, target) - lr[:, :-1].gather(-1, target)).abs().flatten()
        mean, p95, worst = float(diff.mean()), float(torch.quantile(diff, 0.95)), float(diff.max())
    else:
        mean = p95 = worst = 0.0
    kl = (lr.exp() * (lr - lc)).sum(-1).clamp_min(0.0)
    flips = int((lc.argmax(-1) != lr.argmax(-1)).sum())
    top1_miss = flips / (B * T)
    top1 = 1 - top1_miss
    metrics = {
        "positions": B * max(T - 1, 0),
        "mean_abs": mean,
        "p95_abs": p95,
        "max_abs": worst,
        "kl_mean": float(kl.mean()),
        "kl_max": float(kl.max()),
        "top1_agreement": top1,
    }
    judged = {
        "mean_abs": (mean, rows.logprob_mean),
        "p95_abs": (p95, rows.logprob_p95),
        "max_abs": (worst, rows.logprob_max),
        "kl_mean": (metrics["kl_mean"], rows.kl),
        "top1_agreement": (top1_miss, rows.top1),
    }
    metrics["verdicts"] = {k: {"tolerance": row, "passed": judge_scalar(v, row)} for k, (v, row) in judged.items()}
    metrics["passed"] = all(v["passed"] for v in metrics["verdicts"].values())
    return metrics
