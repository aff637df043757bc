"""Numbers and types a config or spec cannot be trusted with: every count is bounded before anything is built from it,
and a value of the wrong JSON type is an input error naming the field and the type expected (no coercion)."""

from __future__ import annotations

import copy
import json
import time
from pathlib import Path

import pytest
import torch
import yaml
from click.testing import CliRunner
from dayone.cli import cli
from dayone.core.errors import InputError
from dayone.spec import bounds
from dayone.spec.derive import derive_spec
from dayone.spec.registry import load_spec, parse_spec, spec_to_dict
from safetensors.torch import save_file

DATA = Path(__file__).resolve().parents[1] / "data"
LINEAR = json.loads((DATA / "kimi-linear-48b-a3b.config.json").read_text())
K3 = json.loads((DATA / "kimi-k3.config.json").read_text())


def derive_error(config: dict) -> str:
    start = time.monotonic()
    with pytest.raises(InputError) as err:
        derive_spec(config, "x")
    assert time.monotonic() - start < 2
    message = str(err.value)
    assert "\n" not in message
    return message


def edited(base: dict, **changes) -> dict:
    config = copy.deepcopy(base)
    for dotted, value in changes.items():
        *parents, leaf = dotted.split("__")
        node = config
        for key in parents:
            node = node[key]
        node[leaf] = value
    return config


@pytest.mark.parametrize(
    ("changes", "fragments"),
    [
        ({"num_hidden_layers": 1_000_000_000}, ("num_hidden_layers", "outside 1..1024")),
        ({"num_hidden_layers": "abc"}, ("num_hidden_layers", "must be an integer", "a string")),
        ({"num_hidden_layers": "27"}, ("num_hidden_layers", "must be an integer")),  # no silent coercion
        ({"num_hidden_layers": [27]}, ("num_hidden_layers", "must be an integer", "a list")),
        ({"num_hidden_layers": 27.0}, ("num_hidden_layers", "must be an integer")),
        ({"num_hidden_layers": True}, ("num_hidden_layers", "must be an integer")),
        ({"hidden_size": 10**18}, ("hidden_size", "outside")),
        ({"vocab_size": 10**18}, ("vocab_size",)),
        ({"vocab_size": "163840"}, ("vocab_size", "must be an integer")),
        ({"num_experts": 1_000_000_000}, ("num_experts",)),
        ({"rms_norm_eps": "1e-5"}, ("rms_norm_eps", "finite number")),
        ({"architectures": 5}, ("architectures", "list of class names")),
        ({"architectures": "KimiLinearForCausalLM"}, ("architectures", "list of class names", "a string")),
        ({"architectures": ["Kimi; import os"]}, ("architectures[0]", "class name")),
        ({"linear_attn_config__kda_layers": "1,2,3"}, ("kda_layers", "list of layer numbers")),
        ({"linear_attn_config__kda_layers": ["1"]}, ("kda", "layer numbers")),
        ({"linear_attn_config": [1]}, ("linear_attn_config", "must be an object")),
        ({"model_type": ["kimi_linear"]}, ("model_type",)),
        ({"mla_use_nope": "yes"}, ("mla_use_nope", "true or false")),
        ({"tie_word_embeddings": 1}, ("tie_word_embeddings", "true or false")),
        ({"hidden_act": 7}, ("hidden_act", "must be a string")),
        ({"eos_token_id": 10**400}, ("eos_token_id", "outside")),
        ({"eos_token_id": -1}, ("eos_token_id", "outside")),
    ],
)
def test_wrong_types_and_huge_counts_in_config_json(changes, fragments):
    message = derive_error(edited(LINEAR, **changes))
    assert message.startswith("config.json")
    for fragment in fragments:
        assert fragment in message, message


@pytest.mark.parametrize(
    ("changes", "fragments"),
    [
        ({"text_config__num_hidden_layers": 10**9}, ("text_config: num_hidden_layers",)),
        ({"vision_config": {"patch_size": 14}}, ("vision_config",)),
        ({"vision_config": 5}, ("vision_config", "expected an object")),
        ({"text_config__quantization_config__config_groups": [1]}, ("config_groups", "must be an object", "a list")),
        ({"text_config__quantization_config__config_groups": {}}, ("config_groups is empty",)),
        ({"text_config__quantization_config__config_groups": {"g": 1}}, ("config_groups.g", "expected an object")),
        ({"text_config__quantization_config": "mxfp4"}, ("quantization_config", "expected an object")),
        ({"text_config__architectures": "KimiK3ForCausalLM"}, ("text_config", "architectures")),
    ],
)
def test_wrong_types_in_a_composite_config(changes, fragments):
    message = derive_error(edited(K3, **changes))
    for fragment in fragments:
        assert fragment in message, message


def test_a_null_vision_config_means_no_vision_tower():
    spec = derive_spec(edited(K3, vision_config=None), "x")
    assert spec.passthrough is None


@pytest.mark.parametrize(
    ("path", "value", "field"),
    [
        ("num_layers", 1_000_000_000, "num_layers"),
        ("moe.num_experts", 1_000_000_000, "num_experts"),
        ("vocab_size", 10**18, "vocab_size"),
        ("hidden_size", "7168", "hidden_size"),
        ("mla.num_heads", 64.0, "num_heads"),
        ("mla.nope", "true", "nope"),
        ("norm_eps", float("nan"), "norm_eps"),
        ("layout.attention", "1000000000 x [kda kda kda mla]", "more than 1024 layers"),
        ("layout.attention", {"kda": ["1"]}, "layout.attention"),
        ("kda.a_log_shape", [1] * 100, "a_log_shape"),
    ],
)
def test_spec_bounds_and_types(path, value, field):
    data = spec_to_dict(load_spec("kimi-k3"))
    *parents, leaf = path.split(".")
    node = data
    for key in parents:
        node = node[key]
    node[leaf] = value
    start = time.monotonic()
    with pytest.raises(InputError, match=field.replace("[", r"\[")):
        parse_spec(data, "spec.yaml")
    assert time.monotonic() - start < 2


def test_expert_instances_are_bounded_together():
    data = spec_to_dict(load_spec("kimi-k3"))
    data["moe"]["num_experts"] = bounds.MAX_EXPERTS  # each number allowed, their product not
    with pytest.raises(InputError, match="num_layers x moe.num_experts"):
        parse_spec(data, "spec.yaml")


def test_the_shipped_specs_are_inside_every_bound():
    for name in ("kimi-k3", "kimi-linear-48b-a3b"):
        assert load_spec(name).num_layers <= bounds.MAX_LAYERS


def _run(*args):
    result = CliRunner().invoke(cli, [str(a) for a in args])
    return result.exit_code, result.stdout, result.stderr


def test_commands_refuse_huge_counts_at_once(tmp_path):
    config = tmp_path / "ckpt" / "config.json"
    config.parent.mkdir()
    config.write_text(json.dumps(edited(LINEAR, num_hidden_layers=1_000_000_000)))
    save_file({"lm_head.weight": torch.zeros(1)}, config.parent / "model.safetensors")
    spec = spec_to_dict(load_spec("kimi-k3"))
    spec["moe"]["num_experts"] = 1_000_000_000
    spec_file = tmp_path / "huge.yaml"
    spec_file.write_text(yaml.safe_dump(spec))
    for args in (
        ("inspect", config.parent),
        ("spec", "derive", config),
        ("run", config.parent, "-o", tmp_path / "run"),
        ("inspect", config.parent, "--spec", spec_file),
        ("generate", spec_file, "--target", "vllm", "-o", tmp_path / "out"),
    ):
        start = time.monotonic()
        code, out, err = _run(*args)
        assert code == 2, (args, out, err)
        assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
        assert time.monotonic() - start < 30  # generate's first run imports torch; a count is never iterated


def test_the_payload_of_the_issue_is_refused_by_generate(tmp_path):
    """architectures[0] = 'Kimi"; __import__("os").system(...); X = "' gave exit 0 and a package running the payload."""
    payload = 'Kimi"; __import__("os").system("touch ' + str(tmp_path / "pwned") + '"); X = "'
    root = tmp_path / "ckpt"
    root.mkdir()
    (root / "config.json").write_text(json.dumps(edited(LINEAR, architectures=[payload])))
    save_file({"lm_head.weight": torch.zeros(1)}, root / "model.safetensors")
    code, _, err = _run("generate", root, "--target", "megatron-bridge", "-o", tmp_path / "out")
    assert code == 2 and "architectures[0]" in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "out").exists() and not (tmp_path / "pwned").exists()
