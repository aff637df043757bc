"""Planted mistakes in a generated vLLM adapter, each caught by vLLM itself or by the judge of what vLLM loaded,
with a message naming it: a missing protocol method, a renamed parameter, a dropped tensor, a wrong shard
dimension. Kimi Linear at tiny scale (unquantized: quickest to build); one probe run per mistake."""

from __future__ import annotations

import pytest
from conform_fixtures import plant, prepare, tiny
from dayone.conform.driver import conform_target


@pytest.fixture(scope="module")
def fresh(tmp_path_factory):
    spec = tiny("kimi-linear-48b-a3b")

    def make(label: str):
        checkpoint, adapter = prepare(tmp_path_factory.mktemp(label), spec)
        return spec, checkpoint, adapter

    return make


def _run(spec, checkpoint, adapter, world: int = 1) -> dict:
    """The levels of one probe run. No forward: each mistake here is caught at "accepted" or "loaded", and the driver
    discards a forward that follows a load judged wrong (at world size 2 it would start two more vLLM processes)."""
    (run,) = conform_target("vllm", adapter, checkpoint, spec, (world,), forward_dtypes=()).runs
    return {name: level.model_dump() for name, level in run.levels.items()}


def test_missing_protocol_method(fresh):
    spec, checkpoint, adapter = fresh("no-embed")
    plant(adapter, "model.py", "def embed_input_ids(", "def embed_tokens_of(")
    levels = _run(spec, checkpoint, adapter)
    assert levels["discovered"]["status"] == "pass"
    assert levels["accepted"]["status"] == "fail"
    assert "does not support `--runner generate`" in levels["accepted"]["detail"]
    assert "no embed_input_ids()" in levels["accepted"]["detail"]
    assert levels["built"]["status"] == "not run"


def test_renamed_parameter(fresh):
    spec, checkpoint, adapter = fresh("renamed")
    plant(adapter, "model.py", "self.post_attention_layernorm", "self.pre_mlp_layernorm", count=2)
    levels = _run(spec, checkpoint, adapter)
    assert levels["built"]["status"] == "pass"
    assert levels["loaded"]["status"] == "fail"
    assert "post_attention_layernorm.weight is not a parameter of the model" in levels["loaded"]["detail"]


def test_dropped_tensor(fresh):
    spec, checkpoint, adapter = fresh("dropped")
    plant(
        adapter,
        "weight_table.py",
        'Rule("model.norm.weight", "model.norm.weight"',
        'Rule("model.norm.weigh", "model.norm.weight"',
    )
    levels = _run(spec, checkpoint, adapter)
    assert levels["loaded"]["status"] == "fail"
    assert "model.norm.weight: not a tensor of this model's weight table" in levels["loaded"]["detail"]


def test_wrong_shard_dimension(fresh):
    spec, checkpoint, adapter = fresh("shard-dim")
    plant(adapter, "model.py", "self.o_proj = RowParallelLinear(", "self.o_proj = ColumnParallelLinear(")
    levels = _run(spec, checkpoint, adapter, world=2)
    assert levels["built"]["status"] == "pass"
    assert levels["loaded"]["status"] == "fail"
    assert "self_attn.o_proj.weight: shape" in levels["loaded"]["detail"]


def test_forward_mistake_is_caught_and_placed(fresh):
    """A routed expert weighed 1% too heavily on the CPU path: vLLM loads and generates, the judge finds the
    log-probs off and names the first MoE layer (Kimi Linear's layer 0 is dense) from the engine's own layer outputs."""
    spec, checkpoint, adapter = fresh("forward")
    plant(adapter, "cpu.py", "y * weights[rows, slots, None]", "y * weights[rows, slots, None] * 1.01")
    (run,) = conform_target("vllm", adapter, checkpoint, spec, (1,), forward_dtypes=("float32",)).runs
    assert run.levels["loaded"].status == "pass"
    forward = run.levels["forward"]
    assert forward.status == "fail"
    assert forward.figures["float32.logprob_max_abs"] > 1e-4
    assert forward.figures["float32.first_differing_layer"].startswith("layers.1 ")
    assert "first layer that differs: layers.1 " in forward.detail
