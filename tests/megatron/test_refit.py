"""Refit, the loop an RL run repeats: after one SGD step of the Megatron model (KDA through the chunked autograd
path), its weights go through Miles' converter entry to checkpoint names and into the running vLLM engine through
vLLM's own in-place weight update (`LLM.collective_rpc("reload_weights")`: vLLM's loader, the model's load_weights
as in conform's second load, vLLM's layerwise post-load processing), in the same engine session that made the
rollout. Afterwards no tensor of the engine's model is left on the meta device (the placeholders vLLM's reload
loads into; the adapter's derived tensors included), and the engine's log-probs of the rollout's sequences equal
the trained Megatron model's within the fp32 bounds of test_miles_end_to_end and differ from its own pre-refit
ones by far more, so a refit that did not reach the engine (or reached it partly: vLLM keeps a layer's old weights
when its loaders were bypassed) fails."""

from __future__ import annotations

import pytest
import torch
from dayone.adapters.rl import rl_metrics
from test_miles_end_to_end import LIMIT_MEAN, LIMIT_TOKEN


def compare(a: list[list[float]], b: list[list[float]]) -> dict:
    return rl_metrics([torch.tensor(x) for x in a], [torch.tensor(x) for x in b])


@pytest.mark.slow
def test_the_engine_serves_the_trained_weights_after_refit(rl_iteration):
    session, trainer = rl_iteration.session, rl_iteration.trainer
    refit = compare(trainer["after"], session["after"])
    moved = compare(session["after"], session["before"])
    stale = compare(trainer["after"], session["before"])
    print({"refit": refit, "engine_moved": moved, "stale": stale, "refit_io": session["refit"],
           "loss": trainer["loss"], "seconds": rl_iteration.seconds})  # fmt: skip
    assert session["refit"]["tensors"] == trainer["synced_tensors"]
    assert session["refit"]["meta"] == []
    assert trainer["tensors_moved"] > 150  # the step changed (nearly) every weight the engine received
    assert refit["train_rollout_logprob_abs_diff"] <= LIMIT_MEAN
    assert refit["train_rollout_logprob_abs_diff_max"] <= LIMIT_TOKEN
    assert moved["train_rollout_logprob_abs_diff"] > 1000 * LIMIT_MEAN
    assert stale["train_rollout_logprob_abs_diff"] > 1000 * LIMIT_MEAN
