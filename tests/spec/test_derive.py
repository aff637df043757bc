"""HF config.json -> spec: published configs, transformers 5.x configs, round trips and contradictions."""

import copy
import json
from pathlib import Path

import pytest
from dayone.core.errors import InputError
from dayone.spec.derive import derive_spec
from dayone.spec.hf_config import to_hf_config
from dayone.spec.layout import from_index_lists, parse_expression, to_expression, to_index_lists
from dayone.spec.registry import load_spec

REFERENCE = Path(__file__).resolve().parents[1] / "data"
MODELS = ["kimi-k3", "kimi-linear-48b-a3b"]


def published(name: str) -> dict:
    return json.loads((REFERENCE / f"{name}.config.json").read_text())


def without_release(spec):
    return spec.model_copy(update={"release": spec.release.model_copy(update={"repo": None})})


@pytest.mark.parametrize("name", MODELS)
def test_published_config_derives_the_shipped_spec(name):
    shipped = load_spec(name)
    derived = derive_spec(published(name), name, num_shards=shipped.release.num_shards)
    assert derived == without_release(shipped)


@pytest.mark.parametrize("name", MODELS)
def test_spec_to_config_round_trip(name):
    shipped = load_spec(name)
    derived = derive_spec(to_hf_config(shipped), name, num_shards=shipped.release.num_shards)
    assert derived == without_release(shipped)


def transformers5_style(config: dict) -> dict:
    """What transformers 5.x writes for the same model: layer_types lists and renamed MoE keys."""
    c = copy.deepcopy(config)
    linear = c.pop("linear_attn_config")
    kinds = from_index_lists(
        {"kda": linear["kda_layers"], "mla": linear["full_attn_layers"]}, c["num_hidden_layers"], "test"
    )
    c["layer_types"] = ["linear_attention" if k == "kda" else "full_attention" for k in kinds]
    c["mlp_layer_types"] = ["dense"] + ["sparse"] * (c["num_hidden_layers"] - 1)
    c.pop("first_k_dense_replace")
    c["linear_num_heads"], c["linear_head_dim"] = linear["num_heads"], linear["head_dim"]
    c["linear_conv_kernel_dim"] = linear["short_conv_kernel_size"]
    c["num_local_experts"] = c.pop("num_experts")
    c["num_experts_per_tok"] = c.pop("num_experts_per_token")
    c["n_shared_experts"] = c.pop("num_shared_experts")
    return c


def test_transformers5_config_derives_the_same_architecture():
    shipped = load_spec("kimi-linear-48b-a3b")
    derived = derive_spec(
        transformers5_style(published("kimi-linear-48b-a3b")), shipped.name, num_shards=shipped.release.num_shards
    )
    # transformers 5.x also stores the dense MLP under block_sparse_moe: the only difference is that name.
    expected = without_release(shipped)
    expected = expected.model_copy(
        update={"checkpoint": expected.checkpoint.model_copy(update={"dense_block": "block_sparse_moe"})}
    )
    assert derived == expected


def test_config_written_by_transformers_save_pretrained(tmp_path):
    import transformers  # a test dependency: the independent kimi_linear oracle

    config = transformers.KimiLinearConfig(
        vocab_size=64,
        hidden_size=32,
        intermediate_size=48,
        moe_intermediate_size=16,
        num_hidden_layers=4,
        num_attention_heads=2,
        num_key_value_heads=2,
        kv_lora_rank=16,
        qk_rope_head_dim=8,
        qk_nope_head_dim=8,
        v_head_dim=8,
        linear_num_heads=2,
        linear_head_dim=8,
        num_local_experts=4,
        num_experts_per_tok=2,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
        linear_attn_config={"kda_layers": [1, 2, 3], "full_attn_layers": [4], "num_heads": 2, "head_dim": 8},
    )
    config.save_pretrained(tmp_path)
    spec = derive_spec(json.loads((tmp_path / "config.json").read_text()), "tiny")
    assert spec.attention_kinds == ("kda", "kda", "kda", "mla")
    assert spec.ffn_kinds == ("dense", "moe", "moe", "moe")
    assert (spec.moe.num_experts, spec.moe.experts_per_token, spec.kda.num_heads) == (4, 2, 2)
    assert spec.checkpoint.dense_block == "block_sparse_moe"


@pytest.mark.parametrize(
    "mutate, field",
    [
        (lambda c: c["linear_attn_config"]["kda_layers"].append(4), "layer 4"),  # overlap with full_attn_layers
        (lambda c: c["linear_attn_config"]["kda_layers"].remove(1), "layers 1"),  # a layer in no list
        (lambda c: c["linear_attn_config"]["kda_layers"].append(99), "layer 99"),
        (lambda c: c.update(num_local_experts=128), "num_experts"),  # renamed key disagrees
        (lambda c: c.update(model_type="llama"), "model_type"),
        (lambda c: c.pop("hidden_size"), "hidden_size"),
        (lambda c: c.update(hidden_act="gelu"), "hidden_act"),
        (lambda c: c.update(layer_types=["linear_attention"] * 27), "layer_types"),
        (lambda c: c.update(num_hidden_layers=26), "layer"),  # counts do not add up
    ],
)
def test_contradictions_name_the_field(mutate, field):
    config = published("kimi-linear-48b-a3b")
    mutate(config)
    with pytest.raises(InputError) as err:
        derive_spec(config, "x")
    assert field in str(err.value)


def test_k3_text_config_contradiction_is_named():
    config = published("kimi-k3")
    config["text_config"]["linear_attn_config"]["full_attn_layers"].append(1)
    with pytest.raises(InputError, match="text_config.*layer 1"):
        derive_spec(config, "x")


def test_layout_expression_and_index_lists_agree():
    expr = parse_expression("23 x [kda kda kda mla] + [mla]", ("kda", "mla"), "f")
    lists = published("kimi-k3")["text_config"]["linear_attn_config"]
    assert expr == from_index_lists({"kda": lists["kda_layers"], "mla": lists["full_attn_layers"]}, 93, "f")
    assert to_index_lists(expr)["mla"] == lists["full_attn_layers"]
    assert to_expression(expr) == "23 x [kda kda kda mla] + [mla]"


@pytest.mark.parametrize("bad", ["23 x [kda kda", "0 x [kda]", "3 x []", "2 x [kda gqa]", "[kda] + + [mla]"])
def test_bad_layout_expressions(bad):
    with pytest.raises(InputError, match="layout"):
        parse_expression(bad, ("kda", "mla"), "layout.attention")
