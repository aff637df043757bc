"""`integrate spec ...` and `integrate plan` as a user runs them."""

import json
from pathlib import Path

import yaml
from cli_runner import integrate


def test_spec_list():
    result = integrate("spec", "list", "--json")
    assert result.code == 0
    assert {row["name"] for row in json.loads(result.out)} >= {"kimi-k3", "kimi-linear-48b-a3b"}


def test_spec_list_reads_what_validation_reads():
    """`spec list` reads three fields from the YAML without pydantic: they are the validated spec's."""
    from dayone.spec.registry import list_specs, load_spec, shipped_summaries

    validated = [load_spec(name) for name in list_specs()]
    assert shipped_summaries() == [
        {"name": s.name, "architecture": s.hf.architecture, "num_layers": s.num_layers} for s in validated
    ]


def test_spec_show_json_has_the_layer_table_and_params():
    result = integrate("spec", "show", "kimi-k3", "--json")
    assert result.code == 0, result.err
    shown = json.loads(result.out)
    assert shown["name"] == "kimi-k3" and shown["num_layers"] == 93
    assert len(shown["layers"]) == 93
    assert shown["layers"][3] == {"index": 3, "attention": "mla", "ffn": "moe", "snapshot": False}
    assert shown["layers"][0]["ffn"] == "dense" and shown["layers"][12]["snapshot"]
    assert isinstance(shown["params"]["total"], int) and isinstance(shown["params"]["activated"], int)
    assert 2.75e12 < shown["params"]["total"] < 2.81e12


def test_spec_show_human_output():
    result = integrate("spec", "show", "kimi-linear-48b-a3b")
    assert result.code == 0 and "6 x [kda kda kda mla] + [kda kda mla]" in result.out


def test_spec_derive_writes_a_loadable_spec(tmp_path):
    config = tmp_path / "kimi-k3" / "config.json"
    config.parent.mkdir()
    config.write_text((Path(__file__).resolve().parents[1] / "data/kimi-k3.config.json").read_text())
    out = tmp_path / "derived.yaml"
    result = integrate("spec", "derive", config, "-o", out)
    assert result.code == 0, result.err
    assert yaml.safe_load(out.read_text())["name"] == "kimi-k3"
    shown = json.loads(integrate("spec", "show", out, "--json").out)
    assert shown["num_layers"] == 93


def test_plan_rules_out_one_h200():
    result = integrate("plan", "kimi-k3", "--gpu", "h200", "--gpus", "1", "--json")
    assert result.code == 0
    plan = json.loads(result.out)
    assert not plan["fits"] and plan["min_gpus"] == 13
    # Even with infinite memory, one H200's bandwidth caps batch-1 decode far below the published ~113 tok/s.
    assert plan["decode_bound_tokens_per_s"] < 113
    assert plan["decode_bound_tokens_per_s"] == plan["aggregate_hbm_bytes_per_s"] / plan["decode_bytes_per_token"]
    text = integrate("plan", "kimi-k3", "--gpu", "h200", "--gpus", "1").out
    assert "does not fit" in text and "13 x H200" in text


def test_plan_on_an_8_gpu_node_allows_the_published_speed():
    plan = json.loads(integrate("plan", "kimi-k3", "--gpu", "gb300", "--gpus", "8", "--json").out)
    assert plan["fits"] and plan["free_bytes_for_requests"] > 0
    assert plan["decode_bound_tokens_per_s"] > 113
    assert plan["kda_state_bytes_per_request"] == 69 * (96 * 128 * 128 * 4 + 3 * 3 * 12288 * 2)
    assert plan["mla_cache_bytes_per_token"] == 24 * 576 * 2


def test_plan_unknown_gpu_is_a_usage_error():
    result = integrate("plan", "kimi-k3", "--gpu", "tpu")
    assert result.code == 2 and "Traceback" not in result.err
