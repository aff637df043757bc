"""`integrate spec ...` and `integrate plan` as a user runs them."""

import json
from pathlib import Path

import yaml
from checkpoints import synthesize
from cli_runner import assert_bad_input, integrate


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
    assert result.code == 0
    # the summary line too, not only the YAML: rich markup once ate the brackets there
    assert "attention: 6 x [kda kda kda mla] + [kda kda mla]" in result.out
    assert "ffn:       [dense] + 26 x [moe]" in result.out


def test_spec_show_off_a_terminal_is_not_wrapped():
    """Piped (as here), no line is hard-wrapped at 80 columns: the layer table's long lines stay whole."""
    result = integrate("spec", "show", "kimi-k3", env={"COLUMNS": "80"})
    assert result.code == 0
    assert max(map(len, result.out.splitlines())) > 80
    assert "…" not in result.out


def test_a_mistyped_spec_name_teaches_the_naming_rule():
    err = assert_bad_input(integrate("spec", "show", "Kimi_K3"), "did you mean kimi-k3?")
    assert "lowercase letters, digits, '.' and '-'" in err


def test_spec_derive_writes_a_loadable_spec(tmp_path):
    config = tmp_path / "downloaded" / "config.json"  # the release's config: named as its shipped spec, not the folder
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
    assert result.code == 1, "a plan that does not fit exits 1"
    plan = json.loads(result.out)
    assert not plan["fits"] and plan["min_gpus"] == 13
    # Even with infinite memory, one H200's bandwidth caps batch-1 decode far below the published ~113 tok/s.
    assert plan["decode_bound_tokens_per_s"] < 113
    assert plan["decode_bound_tokens_per_s"] == plan["aggregate_hbm_bytes_per_s"] / plan["decode_bytes_per_token"]
    text = integrate("plan", "kimi-k3", "--gpu", "h200", "--gpus", "1").out
    assert "does not fit" in text and "13 x H200" in text


def test_plan_that_does_not_fit_exits_1_and_names_the_smallest_count_per_gpu_kind():
    """8 x H100 cannot hold K3's weights: exit 1, and for each GPU kind the smallest count whose usable memory
    (count x memory x 0.9) exceeds the served weights: checked here from the datasheet figures, not the planner's."""
    datasheet = {"h100": 80e9, "h200": 141e9, "b200": 180e9, "gb300": 288e9}
    result = integrate("plan", "kimi-k3", "--gpu", "h100", "--gpus", "8", "--json")
    assert result.code == 1
    plan = json.loads(result.out)
    served = plan["served_bytes"]
    expected = {kind: next(n for n in range(1, 100) if int(n * mem * 0.9) > served) for kind, mem in datasheet.items()}
    assert plan["min_gpus_by_kind"] == expected and expected["h200"] == 13
    text = integrate("plan", "kimi-k3", "--gpu", "h100", "--gpus", "8")
    assert text.code == 1 and "13 x h200" in text.out and f"{expected['h100']} x h100" in text.out
    fits = integrate("plan", "kimi-k3", "--gpu", "h200", "--gpus", "13", "--json")
    assert fits.code == 0 and json.loads(fits.out)["fits"]


def test_the_runs_plan_stage_fails_when_the_model_does_not_fit(tmp_path):
    """`run --gpus 8` on H200 for K3 (a stand-in of it): the plan stage fails and the run exits 1; without --gpus
    the plan takes the smallest count that fits and passes."""
    synthesize(tmp_path / "ck", "kimi-k3", "--scale", "tiny", "--layers", "4", "--shards", "1")
    skip = [
        a for stage in ("coverage", "generate", "conform", "compile", "validate", "package") for a in ("--skip", stage)
    ]
    args = ("run", tmp_path / "ck", "--stand-in-for", "kimi-k3", *skip, "--json")
    small = integrate(*args, "--gpus", "8", "-o", tmp_path / "eight")
    assert small.code == 1, small.err
    stages = {s["stage"]: s for s in json.loads(small.out)["stages"]}
    assert stages["plan"]["status"] == "fail" and "13 x h200" in stages["plan"]["summary"]
    default = integrate(*args, "-o", tmp_path / "smallest")
    assert default.code == 0, default.err
    stages = {s["stage"]: s for s in json.loads(default.out)["stages"]}
    assert stages["plan"]["status"] == "pass" and stages["plan"]["summary"].startswith("13 x h200")


def test_plan_on_an_8_gpu_node_allows_the_published_speed():
    plan = json.loads(integrate("plan", "kimi-k3", "--gpu", "gb300", "--gpus", "8", "--json").out)
    assert plan["fits"] and plan["free_bytes_for_requests"] > 0
    assert plan["decode_bound_tokens_per_s"] > 113
    assert plan["kda_state_bytes_per_request"] == 69 * (96 * 128 * 128 * 4 + 3 * 3 * 12288 * 2)
    assert plan["mla_cache_bytes_per_token"] == 24 * 576 * 2


def test_plan_unknown_gpu_is_a_usage_error():
    result = integrate("plan", "kimi-k3", "--gpu", "tpu")
    assert result.code == 2 and "Traceback" not in result.err
