"""spec -> config.json -> spec: every rank and gate kind the schema allows comes back; what cannot is refused.

Vendor keys carry what the vendor config defines (gate_lower_bound, use_full_rank_gate); the namespaced `dayone`
block carries the rest, and only where a value differs from what derivation assumes without it.
"""

from __future__ import annotations

import json

import pytest
from cli_runner import assert_bad_input, integrate
from dayone.core.errors import InputError
from dayone.spec.derive import derive_spec
from dayone.spec.hf_config import to_hf_config
from dayone.spec.registry import load_spec, spec_to_dict
from dayone.spec.schema import ModelSpec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

BASES = ["kimi-k3", "kimi-linear-48b-a3b"]
GATES = [{"kind": "plain"}, {"kind": "safe", "lower_bound": -5.0}, {"kind": "safe", "lower_bound": -0.25}]
OUTPUT_GATES = ["full_rank", "low_rank"]


def variant(base: str, gate: dict, gate_rank: int, output_gate: str, output_rank: int | None, **kda) -> ModelSpec:
    data = spec_to_dict(load_spec(base))
    data["kda"].update(gate={**gate, "rank": gate_rank}, **kda)
    data["kda"]["output_gate"] = {"kind": output_gate, **({"rank": output_rank} if output_gate == "low_rank" else {})}
    return ModelSpec.model_validate(data)


def read_back(spec: ModelSpec) -> ModelSpec:
    """What a reader of the written config.json derives (through JSON text, as a checkpoint carries it)."""
    config = json.loads(json.dumps(to_hf_config(spec)))
    return derive_spec(config, spec.name, num_shards=spec.release.num_shards)


def same(spec: ModelSpec, back: ModelSpec) -> bool:
    return back.model_dump(exclude={"release"}) == spec.model_dump(exclude={"release"})


@pytest.mark.parametrize("base", BASES)
@pytest.mark.parametrize("gate", GATES, ids=lambda g: f"{g['kind']}{g.get('lower_bound', '')}")
@pytest.mark.parametrize("output_gate", OUTPUT_GATES)
@pytest.mark.parametrize("rank", ["head_dim", 1, 32, 96, 257])
def test_ranks_and_gate_kinds_round_trip(base, gate, output_gate, rank):
    head_dim = load_spec(base).kda.head_dim
    r = head_dim if rank == "head_dim" else rank
    spec = variant(base, gate, r, output_gate, (r // 2 or 1) if output_gate == "low_rank" else None)
    config = to_hf_config(spec)
    text = config.get("text_config", config)
    assert ("gate_lower_bound" in text["linear_attn_config"]) == (gate["kind"] == "safe")  # vendor keys, where defined
    assert text["linear_attn_config"].get("use_full_rank_gate", False) == (output_gate == "full_rank")
    block = config.get("dayone", {}).get("kda", {})
    assert block.get("gate_rank") == (None if r == head_dim else r)  # dayone keys only where vendor has none
    assert same(spec, read_back(spec))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    base=st.sampled_from(BASES),
    gate=st.sampled_from(GATES),
    output_gate=st.sampled_from(OUTPUT_GATES),
    gate_rank=st.integers(1, 4096),
    output_rank=st.integers(1, 4096),
    padding=st.integers(0, 64),
    kda_eps=st.sampled_from([1e-6, 1e-5, 3e-7]),
    mla_eps=st.sampled_from([1e-6, 1e-5, 2e-3]),
    shared=st.integers(1, 9000),
)
def test_any_schema_valid_kda_mla_moe_values_round_trip(
    base, gate, output_gate, gate_rank, output_rank, padding, kda_eps, mla_eps, shared
):
    heads = load_spec(base).kda.num_heads
    spec = variant(base, gate, gate_rank, output_gate, output_rank if output_gate == "low_rank" else None,
                   a_log_shape=[heads + padding], norm_eps=kda_eps)  # fmt: skip
    data = spec_to_dict(spec)
    data["mla"]["norm_eps"] = mla_eps
    data["moe"]["shared_intermediate_size"] = shared
    spec = ModelSpec.model_validate(data)
    assert same(spec, read_back(spec))


@pytest.mark.parametrize("name", BASES)
def test_release_values_write_the_release_config(name):
    """At the release's values there is nothing for the block to say: the config is the vendor's keys only."""
    assert "dayone" not in to_hf_config(load_spec(name))


@pytest.mark.parametrize(
    "path, value, fragment",
    [
        (("checkpoint", "moe_block"), "moe", "checkpoint.moe_block='moe'"),
        (("checkpoint", "prefix"), "transformer.", "checkpoint.prefix='transformer.'"),
        (("checkpoint", "experts", "gate"), "gate_proj", "checkpoint.experts.gate='gate_proj'"),
        (("checkpoint", "float32"), ["kda.a_log"], "checkpoint.float32"),
    ],
)
def test_fields_that_cannot_round_trip_are_refused(path, value, fragment):
    data = spec_to_dict(load_spec("kimi-k3"))
    node = data
    for key in path[:-1]:
        node = node.setdefault(key, {})
    node[path[-1]] = value
    with pytest.raises(InputError) as err:
        to_hf_config(ModelSpec.model_validate(data))
    assert fragment in str(err.value) and "cannot be written to config.json" in str(err.value)


def test_refusal_through_synth_is_one_line(tmp_path):
    data = spec_to_dict(load_spec("kimi-linear-48b-a3b"))
    data["checkpoint"]["moe_block"] = "mixer"
    (tmp_path / "spec.json").write_text(json.dumps(data))
    out = tmp_path / "out"
    result = integrate("synth", tmp_path / "spec.json", "--scale", "tiny", "--layers", "2", "-o", out)
    assert_bad_input(result, "checkpoint.moe_block='mixer'", "cannot be written to config.json")
    assert not out.exists()


@pytest.mark.parametrize(
    "block, fragment",
    [
        ("not an object", "dayone must be an object"),
        ({"kda": {"gate_rank": "64"}}, "dayone: kda.gate_rank"),
        ({"kda": {"gate_rank": 0}}, "dayone: kda.gate_rank"),
        ({"kda": {"rank": 64}}, "dayone: kda.rank"),
        ({"kda": {"output_gate_rank": 8}}, "output_gate"),  # the config says full rank
        ({"conventions": {"extends": "kimi_k9"}}, "kimi_k9"),
        ({"conventions": {"prefix": "model."}}, "missing field"),
    ],
)
def test_hostile_dayone_block_is_one_line(block, fragment):
    config = to_hf_config(variant("kimi-linear-48b-a3b", GATES[0], 128, "full_rank", None))
    config["dayone"] = block
    with pytest.raises(InputError) as err:
        derive_spec(config, "x")
    assert fragment in str(err.value) and "\n" not in str(err.value), str(err.value)


def test_block_fields_of_a_section_no_layer_uses_are_ignored():
    """A checkpoint pruned to layers without KDA keeps its config's KDA keys, vendor and dayone alike, unused."""
    config = to_hf_config(variant("kimi-linear-48b-a3b", GATES[0], 32, "low_rank", 16))
    assert config["dayone"]["kda"] == {"gate_rank": 32, "output_gate_rank": 16}
    layers = config["num_hidden_layers"]
    config["linear_attn_config"].update(kda_layers=[], full_attn_layers=list(range(1, layers + 1)))
    spec = derive_spec(config, "x")
    assert spec.kda is None and set(spec.attention_kinds) == {"mla"}
