"""Bad input to validate and golden: one line naming the tensor or file, exit code 2, no report written."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from cli_runner import assert_bad_input, integrate
from safetensors import safe_open
from safetensors.torch import save_file
from validate_fixtures import ONE_THREAD


def _copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


def _edit(root: Path, name: str, edit) -> None:
    """Rewrite the shard holding `name` with edit(tensor) in its place (same header order and metadata)."""
    index = json.loads((root / "model.safetensors.index.json").read_text())["weight_map"]
    shard = root / index[name]
    with safe_open(str(shard), "pt") as f:
        tensors = {k: f.get_tensor(k) for k in list(f.keys())}
        meta = f.metadata()
    tensors[name] = edit(tensors[name].clone())
    save_file(tensors, str(shard), metadata=meta)


def _validate(root: Path, tmp_path: Path, *args: str):
    report = tmp_path / "report.json"
    result = integrate("validate", root, "--tokens", "1,2,3,4", "--report", report, *args, env=ONE_THREAD)
    assert not report.exists()
    return result


Q_PROJ = "language_model.model.layers.2.self_attn.q_proj.weight"


@pytest.mark.parametrize("value, what", [(float("nan"), "NaN"), (float("inf"), "Inf")])
def test_nonfinite_weight(k3_13, tmp_path, value, what):
    root = _copy(k3_13, tmp_path / "ckpt")

    def poison(t):
        t[1, 2] = value
        return t

    _edit(root, Q_PROJ, poison)
    assert_bad_input(_validate(root, tmp_path), Q_PROJ, "NaN or Inf")


def test_wrong_shape(k3_13, tmp_path):
    root = _copy(k3_13, tmp_path / "ckpt")
    name = "language_model.model.layers.3.self_attn.kv_b_proj.weight"
    _edit(root, name, lambda t: t[:, :-1].contiguous())
    assert_bad_input(_validate(root, tmp_path), name, "wrong shape", "expected [64, 32], found [64, 31]")


def test_checkpoint_not_matching_its_spec(k3_13, tmp_path):
    assert_bad_input(_validate(k3_13, tmp_path, "--spec", "kimi-k3"), str(k3_13), "does not match spec kimi-k3")


def test_golden_for_another_vocabulary(k3_13, tmp_path):
    golden = tmp_path / "other.safetensors"
    save_file({"input_ids": torch.zeros(1, 4, dtype=torch.int64), "logits": torch.zeros(1, 4, 100),
               "logprobs": torch.zeros(1, 4, 100)}, str(golden))  # fmt: skip
    line = assert_bad_input(_validate(k3_13, tmp_path, "--reference", f"golden:{golden}"), str(golden))
    assert "vocabulary of 100" in line and "256" in line


def test_tokens(k3_13, tmp_path):
    uneven = tmp_path / "uneven.json"
    uneven.write_text("[[1, 2, 3], [4, 5]]")
    result = integrate("validate", k3_13, "--tokens", uneven, env=ONE_THREAD)
    assert_bad_input(result, str(uneven), "sequence 1 has 2 tokens")
    result = integrate("golden", k3_13, "--tokens", "1,2,999", "-o", tmp_path / "g.safetensors", env=ONE_THREAD)
    assert_bad_input(result, "token id 999", "outside the vocabulary (0..255)")
    assert not (tmp_path / "g.safetensors").exists()


def test_transformers_reference_for_another_family(k3_13, tmp_path):
    line = assert_bad_input(_validate(k3_13, tmp_path, "--reference", "transformers"), "kimi_k3")
    assert "--reference naive" in line
