"""JSON of any depth or number size is one input error in every reader: safetensors headers, config.json, the index,
--tokens files and ids, reports given to `dashboard`, spec files; plus the smaller cases of issue 14."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner
from dayone.cli import cli
from dayone.core import untrusted_json
from dayone.core.errors import InputError
from dayone.validate.tokens import parse_tokens
from safetensors.torch import save_file

CONFIG_TEXT = (Path(__file__).resolve().parents[1] / "data/kimi-linear-48b-a3b.config.json").read_text()
DEEP = "[" * 200_000 + "]" * 200_000
HUGE_INT = "1" * 400
HOSTILE_JSON = {
    "deep": DEEP,
    "deep-object": '{"a":' * 100_000 + "1" + "}" * 100_000,
    "moderately deep": "[" * 500 + "]" * 500,
    "400 digits": f"[{HUGE_INT}]",
    "5000 digits": "[" + "9" * 5000 + "]",
    "NaN": "[NaN]",
    "overflowing float": "[1e999]",
    "not UTF-8": b'{"a": "\xff"}',
}


def run(*args):
    result = CliRunner().invoke(cli, [str(a) for a in args])
    return result.exit_code, result.stdout, result.stderr


def assert_one_line(code, out, err, *fragments):
    assert code == 2, (code, out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


@pytest.mark.parametrize("name", HOSTILE_JSON)
def test_the_helper_refuses_in_one_line(name):
    text = HOSTILE_JSON[name]
    for data in (text, text.encode()) if isinstance(text, str) else (text,):
        with pytest.raises(InputError) as err:
            untrusted_json.loads(data, "x.json")
        assert str(err.value).startswith("x.json: ") and "\n" not in str(err.value)


def test_the_helper_returns_what_json_loads_does():
    assert untrusted_json.loads(CONFIG_TEXT, "config.json") == json.loads(CONFIG_TEXT)
    assert untrusted_json.loads(b'{"a": [1, 2.5, "x", null, true]}', "x") == {"a": [1, 2.5, "x", None, True]}
    assert untrusted_json.loads("[" * 60 + "]" * 60, "x")  # deep enough for any real file, and accepted


def _checkpoint(tmp_path: Path, config: str = CONFIG_TEXT) -> Path:
    root = tmp_path / "ckpt"
    root.mkdir()
    (root / "config.json").write_text(config)
    save_file({"lm_head.weight": torch.zeros(2)}, root / "model.safetensors")
    return root


@pytest.mark.parametrize("name", ["deep", "400 digits", "NaN"])
def test_config_json(tmp_path, name):
    root = _checkpoint(tmp_path, HOSTILE_JSON[name])
    for args in (("inspect", root), ("spec", "derive", root / "config.json"), ("spec", "derive", root)):
        assert_one_line(*run(*args), "config.json")


@pytest.mark.parametrize("name", ["deep", "deep-object", "5000 digits"])
def test_safetensors_header(tmp_path, name):
    root = _checkpoint(tmp_path)
    raw = HOSTILE_JSON[name].encode()
    (root / "model.safetensors").write_bytes(struct.pack("<Q", len(raw)) + raw)
    assert_one_line(*run("inspect", root, "--spec", "kimi-linear-48b-a3b"), "model.safetensors")


@pytest.mark.parametrize("name", ["deep", "400 digits"])
def test_index(tmp_path, name):
    root = _checkpoint(tmp_path)
    (root / "model.safetensors.index.json").write_text(HOSTILE_JSON[name])
    assert_one_line(*run("inspect", root), "model.safetensors.index.json")


def test_an_empty_weight_map_is_a_corrupt_index(tmp_path):
    root = _checkpoint(tmp_path)
    (root / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": {}}))
    assert_one_line(*run("inspect", root), "model.safetensors.index.json", "weight_map is empty")


@pytest.mark.parametrize("name", ["deep", "400 digits", "5000 digits"])
def test_tokens_files_and_ids(tmp_path, name):
    path = tmp_path / "tokens.json"
    path.write_text(HOSTILE_JSON[name])
    with pytest.raises(InputError, match="tokens.json"):
        parse_tokens(str(path), 1000)
    with pytest.raises(InputError, match="--tokens"):
        parse_tokens(f"1,2,{'9' * 5000}", 1000)
    with pytest.raises(InputError, match="outside the vocabulary|int64"):
        parse_tokens(f"1,2,{HUGE_INT}", 1000)
    path.write_text(json.dumps([[1, 2, int(HUGE_INT)]]))
    with pytest.raises(InputError, match="tokens.json"):
        parse_tokens(str(path), 1000)


@pytest.mark.parametrize("name", ["deep", "deep-object", "5000 digits"])
def test_reports_given_to_the_dashboard(tmp_path, name):
    (tmp_path / "r.json").write_text(HOSTILE_JSON[name])
    assert_one_line(*run("dashboard", tmp_path / "r.json", "-o", tmp_path / "site"), "r.json")


@pytest.mark.parametrize(("suffix", "text"), [(".json", DEEP), (".yaml", DEEP), (".json", f"[{HUGE_INT}]")])
def test_spec_files(tmp_path, suffix, text):
    path = tmp_path / f"spec{suffix}"
    path.write_text(text)
    assert_one_line(*run("spec", "show", path), path.name)


def test_an_unknown_layer_kind_names_the_spec_file(tmp_path):
    from dayone.spec.registry import load_spec, spec_to_yaml

    text = spec_to_yaml(load_spec("kimi-k3")).replace("[kda kda kda mla]", "[kda kda kda gqa]")
    assert "gqa" in text
    (tmp_path / "mine.yaml").write_text(text)
    assert_one_line(*run("spec", "show", tmp_path / "mine.yaml"), "mine.yaml", "unknown layer kind 'gqa'")


def test_spec_derive_takes_a_hub_repo_id_as_inspect_does(tmp_path):
    revision = "0123456789abcdef0123456789abcdef01234567"
    cache = tmp_path / "hub"
    snapshot = cache / "models--acme--tiny-linear" / "snapshots" / revision
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text(CONFIG_TEXT)
    save_file({"lm_head.weight": torch.zeros(2)}, snapshot / "model.safetensors")
    env = {**os.environ, "HF_HUB_CACHE": str(cache), "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run(
        [sys.executable, "-P", "-m", "dayone", "spec", "derive", f"acme/tiny-linear@{revision}"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    # named after the model (kimi_linear and its size), not after the repo (tiny-linear)
    assert "name: kimi-linear-" in proc.stdout and "KimiLinearForCausalLM" in proc.stdout
