"""A legitimate variation real checkpoints show: transformers saves a bf16 Kimi Linear with its router weight and bias in
fp32 and A_log in bf16. inspect reports that as a finding (exit 0) and validate runs with the checkpoint's dtypes;
a float stored where the spec expects an integer (or the reverse) is still a mismatch."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner
from dayone.cli import cli
from safetensors.torch import load_file, save_file
from tiny_checkpoint import tiny_kimi_linear


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    # 4 layers: the first MLA layer is the 4th (transformers' reference needs one attention layer for its cache)
    return tiny_kimi_linear(tmp_path_factory, "dtype", layers=4)


def _restore(root: Path, change) -> None:
    """Rewrite the single shard with some tensors converted (values kept)."""
    shard = next(root.glob("*.safetensors"))
    tensors = load_file(shard)
    for name in list(tensors):
        tensors[name] = change(name, tensors[name])
    save_file(tensors, shard, metadata={"format": "pt"})


def _as_transformers_saves(name: str, t: torch.Tensor) -> torch.Tensor:
    if name.endswith(("block_sparse_moe.gate.weight", "gate.e_score_correction_bias")):
        return t.float()
    if name.endswith("A_log"):
        return t.bfloat16()
    return t


def run(*args):
    result = CliRunner().invoke(cli, [str(a) for a in args])
    assert isinstance(result.exception, SystemExit | None), result.exception
    return result.exit_code, result.stdout, result.stderr


def test_other_float_dtypes_are_findings_and_validation_uses_them(tiny, tmp_path):
    import shutil

    root = tmp_path / "ckpt"
    shutil.copytree(tiny, root)
    _restore(root, _as_transformers_saves)
    code, out, err = run("inspect", root, "--json")
    report = json.loads(out)
    assert code == 0 and report["ok"], err
    findings = report["findings"]["dtype"]
    assert any("gate.weight: stored as F32, the spec expects BF16" in f for f in findings), findings
    assert any("A_log: stored as BF16, the spec expects F32" in f for f in findings), findings
    assert report["mismatched"]["dtype"] == []
    code, out, err = run("validate", root, "--tokens", "1,2,3,4,5,6,7,8", "--device", "cpu", "--no-reload-check")
    assert code == 0, out + err


def test_a_float_where_an_integer_is_expected_is_still_a_mismatch(tiny, tmp_path):
    import shutil

    root = tmp_path / "ckpt"
    shutil.copytree(tiny, root)
    _restore(root, lambda name, t: t.to(torch.uint8) if name.endswith("A_log") else t)
    code, out, _ = run("inspect", root, "--json")
    report = json.loads(out)
    assert code == 1 and report["mismatched"]["dtype"], report
