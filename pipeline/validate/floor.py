"""End to end without routing replay, judged against a noise floor measured in the same run.

Without replay the candidate routes on its own scores. Where two experts' scores sit within bf16 error of a tie, the
bf16 candidate picks the other expert, that token's output moves by a whole expert's share, and the layers above
carry the change on (through attention, to other tokens too). How far the logits end up from the reference's then
depends on the checkpoint (how many near-ties its routers have, how much one flip moves a token, how much the stack
amplifies a change) far more than on the candidate's arithmetic: a random 13-layer K3 with near-tied routers lands
at logits rel_rms 0.15-0.17 and top-1 agreement ~0.8 with a fast tier that is right at every layer (dayone's own
93-layer tiny K3: 0.12 and 0.81). No fixed bound can judge that; a bound measured on the same checkpoint and
tokens can.

The floor: the reference tier's own arithmetic (token-by-token KDA, per-token experts, fp32 inside the ops where it
computes in fp32) with its weights and activations in bf16, routing itself. Its drift from the fp32 reference is
what bf16 precision alone does to this checkpoint, flips included, with no fast-tier kernel involved. The fast
tier's un-replayed figures are judged against it: each judged figure must be within k x the floor's, or within the
tolerance table's bound for it, whichever is larger (a floor of 0 flips must not make 1 flip a failure).

Judged: logits rel_rms, the mean next-token |log-prob diff|, the mean KL (averages over every position, and the
logits over the vocabulary too: stable from draw to draw), and the top-1 disagreement, a count of positions: k
multiplies the floor's count plus two of its standard deviations (F + 2 sqrt(F), F flips being Poisson-like), since
17 flips of 144 could as well have been 25. Reported, not judged: the p95 and the worst single position (|diff|,
KL), extremes of a heavy-tailed draw whose ratio between two draws is too noisy to bound (measured up to 2.4 with no
defect).

k = 2 (FLOOR_K): the fast tier and the floor are two bf16 implementations of the same math, so their distances
from the fp32 truth are two draws of one random process (which near-ties flip, and what the flips do downstream).
Measured (benchmarks/validate_floor.py: synthetic K3 with ordinary routers at 6, 13, 24 and 93 layers and with
near-tied routers at 13 and 24 layers, three seeds, 2 x 72 tokens): wherever the candidate is outside the table,
i.e. wherever the floor decides, a judged figure is 0.76-1.27x what k multiplies; larger ratios (up to 3.3, on a
KL of 2e-4) occur only where both figures are far inside the table, and there the table's bound decides. The routed
experts' combine with a wrong sign gives 3.2 to 5.6 on the logits and the log-prob mean, 10 to 19 on the KL, 2.3
to 4.1 on the top-1 count: red. An op 10% off stays within the floor un-replayed (ratios 0.7-1.4): the layer-local and
replayed checks are what catch it; the floor only keeps the un-replayed figures from calling precision a bug.
The floor moves when the reference tier's internal rounding points move (the reference calling the kernels'
reference functions moved the near-tied checkpoint's floor from 0.175 to 0.151): a draw, as the fast tier's is.

An fp32 candidate (the reference tier against transformers or a golden file) has no bf16 floor: its un-replayed
figures are judged by the table alone (fp32 routers flip only on ties within ~1e-6).
"""

from __future__ import annotations

import math

import torch
from dayone.adapters.model.config import Tier
from dayone.core.numerics import TOLERANCES
from dayone.validate.metrics import Rows

FLOOR_TIER = Tier("reference", torch.bfloat16)
FLOOR_K = 2.0
FLOOR_DESCRIPTION = "reference tier in bf16 (its arithmetic, bf16 weights and activations), routing itself"


def figures(logits_row: dict, logprobs: dict, tokens: int) -> dict:
    """The end-to-end figures of one un-replayed run: its logits row and its log-prob metrics (over `tokens`
    positions for the top-1 agreement), flat."""
    return {
        "logits_rel_rms": logits_row["rel_rms"],
        "logits_cosine": logits_row["cosine"],
        "logits_max_abs": logits_row["max_abs"],
        "logits_nonfinite_agree": logits_row["nonfinite_agree"],
        "mean_abs": logprobs["mean_abs"],
        "p95_abs": logprobs["p95_abs"],
        "max_abs": logprobs["max_abs"],
        "kl_mean": logprobs["kl_mean"],
        "kl_max": logprobs["kl_max"],
        "top1_agreement": logprobs["top1_agreement"],
        "top1_disagreement": 1 - logprobs["top1_agreement"],
        "positions": logprobs["positions"],
        "top1_positions": tokens,
    }


def table_bounds(rows: Rows) -> dict[str, tuple[str, float]]:
    """Judged figure -> (tolerance row, its bound)."""
    bound = {
        "logits_rel_rms": (rows.activations, TOLERANCES[rows.activations].rel_rms),
        "mean_abs": (rows.logprob_mean, TOLERANCES[rows.logprob_mean].max_abs),
        "kl_mean": (rows.kl, TOLERANCES[rows.kl].max_abs),
        "top1_disagreement": (rows.top1, TOLERANCES[rows.top1].max_abs),
    }
    return {name: (row, float(value)) for name, (row, value) in bound.items() if value is not None}


def floor_scale(name: str, floor: dict) -> float:
    """What k multiplies for judged figure `name`: the floor's figure; for the top-1 disagreement, a fraction of
    positions, the floor's count plus two standard deviations of it (F + 2 sqrt(F)), as a fraction again."""
    value = floor[name]
    if name != "top1_disagreement":
        return value
    positions = max(int(floor["top1_positions"]), 1)
    flips = value * positions
    return (flips + 2 * math.sqrt(flips)) / positions


def judge(candidate: dict, floor: dict | None, rows: Rows, k: float = FLOOR_K) -> dict:
    """Verdicts on the candidate's un-replayed figures: within max(table bound, k x floor) (table alone: no floor)."""
    verdicts = {}
    for name, (row, table) in table_bounds(rows).items():
        value = candidate[name]
        scale = floor_scale(name, floor) if floor is not None else None
        bound = table if scale is None else max(table, k * scale)
        verdicts[name] = {"value": value, "floor": floor[name] if floor is not None else None, "floor_scale": scale,
                          "table": row, "table_bound": table, "bound": bound, "passed": bool(value <= bound)}  # fmt: skip
    finite = bool(candidate["logits_nonfinite_agree"])
    verdicts["logits_nonfinite_agree"] = {"value": finite, "passed": finite}
    return verdicts
