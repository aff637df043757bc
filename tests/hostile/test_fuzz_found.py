"""Failures found by the fuzz test (test_fuzz.py) or while writing it, kept as regular tests: each was a traceback
before its fix."""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path

import pytest
from click.testing import CliRunner
from dayone.cli import cli
from tiny_checkpoint import tiny_kimi_linear


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    return tiny_kimi_linear(tmp_path_factory, "found", layers=2)


def _edit_header(shard: Path, edit) -> None:
    raw = shard.read_bytes()
    (length,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + length])
    edit(header)
    text = json.dumps(header).encode()
    shard.write_bytes(struct.pack("<Q", len(text)) + text + raw[8 + length :])


def test_a_list_as_a_tensor_dtype_is_bad_input(tiny, tmp_path):
    # header_scan's bulk pass put every dtype in a set: TypeError: unhashable type: 'list'
    root = tmp_path / "ckpt"
    shutil.copytree(tiny, root)
    shard = next(root.glob("*.safetensors"))
    _edit_header(shard, lambda h: h["model.layers.0.self_attn.k_conv1d.weight"].update(dtype=["BF16"]))
    result = CliRunner().invoke(cli, ["inspect", str(root)])
    assert result.exit_code == 2 and isinstance(result.exception, SystemExit | None)
    assert len(result.stderr.strip().splitlines()) == 1 and shard.name in result.stderr


def test_validate_on_a_checkpoint_with_only_kda_layers(tmp_path):
    # transformers' reference forward built a cache and asked it for a length: ValueError with no attention layer
    out = tmp_path / "kda-only"
    args = ["synth", "kimi-linear-48b-a3b", "--scale", "tiny", "--layers", "2", "--shards", "1", "-o", str(out)]
    assert CliRunner().invoke(cli, args).exit_code == 0
    result = CliRunner().invoke(cli, ["validate", str(out), "--tokens", "1,2,3,4", "--device", "cpu"])
    assert isinstance(result.exception, SystemExit | None), result.exception
    assert result.exit_code == 0, result.output


def test_a_shape_that_multiplies_a_string_is_bad_input(tiny, tmp_path):
    # math.prod([2**63, ""]) repeats a string 2**63 times: OverflowError from the header check
    root = tmp_path / "ckpt"
    shutil.copytree(tiny, root)
    shard = next(root.glob("*.safetensors"))
    _edit_header(shard, lambda h: h["model.norm.weight"].update(shape=[2**63, ""]))
    result = CliRunner().invoke(cli, ["inspect", str(root)])
    assert result.exit_code == 2 and isinstance(result.exception, SystemExit | None)
    assert len(result.stderr.strip().splitlines()) == 1 and "model.norm.weight" in result.stderr


def test_metadata_that_is_not_strings_is_bad_input_for_every_reader(tiny, tmp_path):
    # {"__metadata__": {"x": {...}}} passed the header check; safetensors' safe_open then raised SafetensorError
    root = tmp_path / "ckpt"
    shutil.copytree(tiny, root)
    shard = next(root.glob("*.safetensors"))
    _edit_header(shard, lambda h: h.update(__metadata__={"x": {"format": "pt"}}))
    for args in (["inspect", str(root)], ["golden", str(root), "--tokens", "1,2", "-o", str(tmp_path / "g.pt")]):
        result = CliRunner().invoke(cli, [*args, "--device", "cpu"] if args[0] == "golden" else args)
        assert result.exit_code == 2 and isinstance(result.exception, SystemExit | None), (args, result.exception)
        assert len(result.stderr.strip().splitlines()) == 1 and "__metadata__" in result.stderr
