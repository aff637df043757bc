"""Planted mistakes in a generated vLLM adapter, each caught by vLLM itself or by the judge of what vLLM loaded,
with a message naming it: a missing protocol method, a renamed parameter, a dropped tensor, a wrong shard
dimension, and a forward mistake found by the forward level. Kimi Linear at tiny scale (unquantized: quickest to
build); each mistake is a copy of the shipped adapter with one edit (conform_fixtures.PLANTED_VLLM), conformed with
the others in the conform tests' one vLLM batch (conftest.py)."""

from __future__ import annotations

import pytest


def planted(vllm_batch, name: str) -> dict:
    """The levels of a planted copy's one run."""
    (run,) = vllm_batch[name].report.runs
    return {level: entry.model_dump() for level, entry in run.levels.items()}


def test_missing_protocol_method(vllm_batch):
    levels = planted(vllm_batch, "no-embed")
    assert levels["discovered"]["status"] == "pass"
    assert levels["accepted"]["status"] == "fail"
    assert "does not support `--runner generate`" in levels["accepted"]["detail"]
    assert "no embed_input_ids()" in levels["accepted"]["detail"]
    assert levels["built"]["status"] == "not run"


# Mistakes the judge of what vLLM loaded names (vLLM builds each model): the planted copy -> what "loaded" says.
CAUGHT_AT_LOADED = {
    "renamed": "post_attention_layernorm.weight is not a parameter of the model",
    "dropped": "model.norm.weight: not a tensor of this model's weight table",
    "shard-dim": "self_attn.o_proj.weight: shape",  # at world size 2
}


@pytest.mark.parametrize("name", sorted(CAUGHT_AT_LOADED))
def test_a_load_mistake_is_named_at_loaded(vllm_batch, name):
    levels = planted(vllm_batch, name)
    assert levels["built"]["status"] == "pass"
    assert levels["loaded"]["status"] == "fail"
    assert CAUGHT_AT_LOADED[name] in levels["loaded"]["detail"]


def test_forward_mistake_is_caught_and_placed(vllm_batch):
    """A routed expert weighed 1% too heavily on the CPU path: vLLM loads and generates, the judge finds the
    log-probs off and names the first MoE layer (Kimi Linear's layer 0 is dense) from the engine's own layer outputs.
    The shipped adapter's forward ran in the same vLLM process (each job forked from it): the copy's edit reached its
    own forward only."""
    (run,) = vllm_batch["forward"].report.runs
    assert run.levels["loaded"].status == "pass"
    forward = run.levels["forward"]
    assert forward.status == "fail"
    assert forward.figures["float32.logprob_max_abs"] > 1e-4
    assert forward.figures["float32.first_differing_layer"].startswith("layers.1 ")
    assert "first layer that differs: layers.1 " in forward.detail
    (shipped_ws1, _) = vllm_batch["shipped"].report.runs
    assert shipped_ws1.levels["forward"].status == "pass", shipped_ws1.levels["forward"].detail
