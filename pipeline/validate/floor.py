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

k = 2 (FLOOR_K): the fast tier and the floor are two bf16 implementations of the same math, so their distances
from the fp32 truth are two draws of one random process (which near-ties flip, and what the flips do downstream).
Measured (benchmarks/validate_floor.py: synthetic K3 with ordinary routers at 6, 13, 24 and 93 layers and with
near-tied routers at 13 and 24 layers, three seeds, 2 x 72 tokens): wherever the candidate is outside the table,
i.e. wherever the floor decides, every judged figure's ratio candidate / floor lies in [0.81, 1.30]. Larger
ratios (up to 3) occur only where both figures are far inside the table (3 top-1 flips against 1 of 144
positions), and there the table's bound decides. The routed experts' combine with a wrong sign gives ratios of
2.6 to 4.7 on four of the figures and 10 to 20 on the KL: k = 2 keeps clear of both. A defect that moves one op
by 10% stays within the floor un-replayed (ratios 0.9-1.4): the layer-local and replayed checks are what catch it,
the floor only keeps the un-replayed figures from calling precision a bug.

Judged: logits rel_rms; next-token |log-prob diff| mean and p95; KL mean; top-1 disagreement. Not judged: the
worst single position (max |diff|, max KL), an extreme of a heavy-tailed draw whose ratio between two draws is
too noisy to bound. An fp32 candidate (the reference tier against transformers or a golden file) has no bf16 floor:
its un-replayed figures are judged by the table alone (fp32 routers flip only on ties within ~1e-6).
"""

from __future__ import annotations

import torch
from dayone.adapters.model.config import Tier
from dayone.core.numerics import TOLERANCES
from dayone.validate.metrics import Rows

FLOOR_TIER = Tier("reference", torch.bfloat16)
FLOOR_K = 2.0
FLOOR_DESCRIPTION = "reference tier in bf16 (its arithmetic, bf16 weights and activations), routing itself"


def figures(logits_row: dict, logprobs: dict) -> dict:
    """The end-to-end figures of one un-replayed run: its logits row and its log-prob metrics, flat."""
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
    }


def table_bounds(rows: Rows) -> dict[str, tuple[str, float]]:
    """Judged figure -> (tolerance row, its bound)."""
    bound = {
        "logits_rel_rms": (rows.activations, TOLERANCES[rows.activations].rel_rms),
        "mean_abs": (rows.logprob_mean, TOLERANCES[rows.logprob_mean].max_abs),
        "p95_abs": (rows.logprob_p95, TOLERANCES[rows.logprob_p95].max_abs),
        "kl_mean": (rows.kl, TOLERANCES[rows.kl].max_abs),
        "top1_disagreement": (rows.top1, TOLERANCES[rows.top1].max_abs),
    }
    return {name: (row, float(value)) for name, (row, value) in bound.items() if value is not None}


def judge(candidate: dict, floor: dict | None, rows: Rows, k: float = FLOOR_K) -> dict:
    """Verdicts on the candidate's un-replayed figures: within max(table bound, k x floor) (table alone: no floor)."""
    verdicts = {}
    for name, (row, table) in table_bounds(rows).items():
        value = candidate[name]
        floor_value = floor[name] if floor is not None else None
        bound = table if floor_value is None else max(table, k * floor_value)
        verdicts[name] = {"value": value, "floor": floor_value, "table": row, "table_bound": table, "bound": bound,
                          "passed": bool(value <= bound)}  # fmt: skip
    finite = bool(candidate["logits_nonfinite_agree"])
    verdicts["logits_nonfinite_agree"] = {"value": finite, "passed": finite}
    return verdicts
