"""mla.rope through config.json: derived from DeepSeek-V3's rope_theta / rope_scaling and from transformers 5.x's
rope_parameters, written back by the config export (which re-derives it), and refused in one line naming the field
for what the model does not implement."""

from __future__ import annotations

import pytest
from dayone.core.errors import InputError
from dayone.spec.derive import derive_spec
from dayone.spec.hf_config import to_hf_config
from dayone.spec.registry import parse_spec, spec_to_dict
from dayone.spec.schema import ModelSpec
from model_fixtures import tiny_k3_spec, with_updates

YARN = {"type": "yarn", "factor": 32.0, "original_max_position_embeddings": 4096, "beta_fast": 1.0, "beta_slow": 1.0,
        "mscale": 1.0, "mscale_all_dim": 1.0}  # Kimi K2's config.json  # fmt: skip


def rope_spec(rope: dict) -> ModelSpec:
    return with_updates(tiny_k3_spec(5), {"mla": {"nope": False, "rope": rope}})


def nope_config() -> dict:
    """config.json of the tiny K3 (NoPE) as the export writes it."""
    return to_hf_config(tiny_k3_spec(5))


def text_of(config: dict) -> dict:
    return config.get("text_config", config)


def test_export_writes_deepseek_fields_and_reads_them_back():
    spec = rope_spec({"theta": 50000.0, "scaling": {"kind": "yarn", **{k: v for k, v in YARN.items() if k != "type"}}})
    text = text_of(to_hf_config(spec))  # raises if the written config does not derive back to the same spec
    assert text["mla_use_nope"] is False and text["rope_theta"] == 50000.0 and text["rope_interleave"] is True
    assert text["rope_scaling"] == YARN
    plain = text_of(to_hf_config(rope_spec({"theta": 10000.0, "interleave": False})))
    assert plain["rope_theta"] == 10000.0 and plain["rope_interleave"] is False and "rope_scaling" not in plain


@pytest.mark.parametrize("form", ["deepseek-v3", "transformers-5"])
def test_derive_reads_both_forms(form):
    config = nope_config()
    text = text_of(config)
    text["mla_use_nope"] = False
    yarn = {k: v for k, v in YARN.items() if k != "type"} | {"beta_fast": 32, "mscale": 1}  # ints, as JSON has them
    if form == "deepseek-v3":
        text.update(rope_theta=50000, rope_scaling={"type": "yarn", **yarn})
    else:  # what transformers 5.x's DeepseekV3Config.save_pretrained writes, no rope_interleave (default true)
        text["rope_parameters"] = {"rope_type": "yarn", "rope_theta": 50000.0, **yarn}
    rope = derive_spec(config, "t").mla.rope
    assert rope.theta == 50000.0 and rope.interleave is True
    assert rope.scaling.model_dump() == {"kind": "yarn", "factor": 32.0, "original_max_position_embeddings": 4096,
                                         "beta_fast": 32.0, "beta_slow": 1.0, "mscale": 1.0, "mscale_all_dim": 1.0}  # fmt: skip


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({}, "missing field 'rope_theta'"),
        ({"rope_theta": 1e4, "rope_scaling": {"type": "linear", "factor": 2.0}}, "rope_scaling: type 'linear' is not"),
        ({"rope_theta": 1e4, "rope_scaling": {**YARN, "attention_factor": 1.2}}, "attention_factor is not implemented"),
        ({"rope_theta": 1e4, "rope_scaling": {**YARN, "truncate": False}}, "truncate False is not implemented"),
        ({"rope_theta": 1e4, "rope_scaling": {"type": "yarn", "factor": 2.0}}, "original_max_position_embeddings"),
        ({"rope_theta": 1e4, "rope_parameters": {"rope_theta": 2e4}}, "contradictory fields"),
    ],
)
def test_refusals_name_the_field(fields, message):
    config = nope_config()
    text = text_of(config)
    text["mla_use_nope"] = False
    text.update(fields)
    with pytest.raises(InputError) as err:
        derive_spec(config, "t")
    assert message in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize(
    ("mla", "message"),
    [
        ({"nope": False}, "rope (theta, and scaling if any) is required"),
        ({"rope": {"theta": 1e4}}, "rope is given but nope is true"),
        ({"nope": False, "rope": {"theta": 1e4, "scaling": {"kind": "linear", "factor": 2.0}}}, "'yarn'"),
        ({"nope": False, "qk_rope_head_dim": 7, "rope": {"theta": 1e4}}, "must be even"),
    ],
)
def test_schema_refuses_inconsistent_rope(mla, message):
    data = spec_to_dict(tiny_k3_spec(5))
    data["mla"].update(mla)
    with pytest.raises(InputError) as err:
        parse_spec(data, "variant.yaml")
    assert str(err.value).startswith("variant.yaml: mla") and message in str(err.value) and "\n" not in str(err.value)
