"""Every malformed checkpoint gives one line naming the file or tensor, exit code 2, and nothing written."""

import json
import os
import struct
from pathlib import Path

import pytest
import torch
from cli_runner import assert_bad_input, integrate
from safetensors.torch import save_file

CONFIG = json.loads((Path(__file__).resolve().parents[1] / "data/kimi-linear-48b-a3b.config.json").read_text())


def header_file(path: Path, entries: dict, data_size: int, declared_len: int | None = None) -> Path:
    raw = json.dumps(entries).encode()
    path.write_bytes(
        struct.pack("<Q", declared_len if declared_len is not None else len(raw)) + raw + b"\0" * data_size
    )
    return path


def folder(tmp_path: Path, files: dict[str, object] | None = None, index: dict | None = None) -> Path:
    root = tmp_path / "ckpt"
    root.mkdir()
    (root / "config.json").write_text(json.dumps(CONFIG))
    if index is not None:
        (root / "model.safetensors.index.json").write_text(json.dumps({"weight_map": index}))
    return root


def test_truncated_data(tmp_path):
    root = folder(tmp_path)
    save_file({"a": torch.zeros(64)}, root / "model.safetensors")
    data = (root / "model.safetensors").read_bytes()
    (root / "model.safetensors").write_bytes(data[:-10])
    assert_bad_input(integrate("inspect", root), "model.safetensors", "truncated")


def test_truncated_header(tmp_path):
    root = folder(tmp_path)
    header_file(
        root / "model.safetensors",
        {"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}},
        16,
        declared_len=5000,
    )
    assert_bad_input(integrate("inspect", root), "model.safetensors", "truncated")


def test_oversized_header_length(tmp_path):
    root = folder(tmp_path)
    header_file(root / "model.safetensors", {}, 0, declared_len=2**40)
    assert_bad_input(integrate("inspect", root), "model.safetensors", "header length")


@pytest.mark.parametrize(
    ("b_offsets", "file_end", "words"),
    [
        pytest.param([8, 24], 24, ("'b'", "overlaps"), id="overlapping-offsets"),
        pytest.param([24, 40], 40, ("gap", "'b'"), id="gap-between-tensors"),
    ],
)
def test_tensors_that_do_not_tile_the_data(tmp_path, b_offsets, file_end, words):
    """a holds bytes 0..16; b starts inside it or leaves bytes 16..24 to nothing."""
    root = folder(tmp_path)
    a = {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}
    b = {"dtype": "F32", "shape": [4], "data_offsets": b_offsets}
    header_file(root / "model.safetensors", {"a": a, "b": b}, file_end)
    assert_bad_input(integrate("inspect", root), "model.safetensors", *words)


def test_offsets_past_end_of_file(tmp_path):
    root = folder(tmp_path)
    header_file(root / "model.safetensors", {"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}, 8)
    assert_bad_input(integrate("inspect", root), "model.safetensors", "truncated")


def test_unknown_dtype(tmp_path):
    root = folder(tmp_path)
    header_file(root / "model.safetensors", {"a": {"dtype": "Q3", "shape": [4], "data_offsets": [0, 16]}}, 16)
    assert_bad_input(integrate("inspect", root), "model.safetensors", "'a'", "unknown dtype 'Q3'")


def test_header_not_json(tmp_path):
    root = folder(tmp_path)
    (root / "model.safetensors").write_bytes(struct.pack("<Q", 4) + b"{{{{")
    assert_bad_input(integrate("inspect", root), "model.safetensors", "JSON")


@pytest.mark.parametrize("target", ["../outside.safetensors", "/etc/passwd", "sub/../../outside.safetensors"])
def test_index_entries_that_leave_the_folder(tmp_path, target):
    (tmp_path / "outside.safetensors").write_bytes(b"")
    root = folder(tmp_path, index={"a": target})
    assert_bad_input(integrate("inspect", root), repr(target))


def test_symlink_leading_out(tmp_path):
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    save_file({"a": torch.zeros(4)}, outside / "shard.safetensors")
    root = folder(tmp_path, index={"a": "shard.safetensors"})
    os.symlink(outside / "shard.safetensors", root / "shard.safetensors")
    assert_bad_input(integrate("inspect", root), "shard.safetensors", "outside the checkpoint folder")


def test_index_names_a_missing_file(tmp_path):
    root = folder(tmp_path, index={"a": "model-00001-of-00002.safetensors"})
    assert_bad_input(integrate("inspect", root), "model-00001-of-00002.safetensors", "does not exist")


def test_index_disagrees_with_header(tmp_path):
    root = folder(tmp_path, index={"a": "s.safetensors", "ghost": "s.safetensors"})
    save_file({"a": torch.zeros(4)}, root / "s.safetensors")
    assert_bad_input(integrate("inspect", root), "'ghost'")


def test_pickle_is_refused_without_the_flag(tmp_path):
    root = folder(tmp_path)
    marker = tmp_path / "executed"
    # A pickle that would create a file if it were ever unpickled.

    class Evil:
        def __reduce__(self):
            return (open, (str(marker), "w"))

    import pickle

    (root / "pytorch_model.bin").write_bytes(pickle.dumps(Evil()))
    assert_bad_input(integrate("inspect", root), "pytorch_model.bin", "--allow-pickle")
    assert not marker.exists()
    # With the flag, torch.load(weights_only=True) still refuses arbitrary objects: bad input, not execution.
    assert_bad_input(integrate("inspect", root, "--allow-pickle"), "pytorch_model.bin")
    assert not marker.exists()


def test_malformed_config(tmp_path):
    root = folder(tmp_path)
    (root / "config.json").write_text("{not json")
    save_file({"a": torch.zeros(4)}, root / "model.safetensors")
    assert_bad_input(integrate("inspect", root), "config.json", "JSON")


def test_unsupported_model_type(tmp_path):
    root = folder(tmp_path)
    (root / "config.json").write_text(json.dumps({**CONFIG, "model_type": "llama"}))
    save_file({"a": torch.zeros(4)}, root / "model.safetensors")
    assert_bad_input(integrate("inspect", root), "config.json", "model_type 'llama'")


def test_no_such_checkpoint(tmp_path):
    assert_bad_input(integrate("inspect", tmp_path / "nope"), "nope")


def test_derive_bad_config_writes_nothing(tmp_path):
    bad = tmp_path / "config.json"
    bad.write_text(json.dumps({**CONFIG, "num_local_experts": 7}))
    out = tmp_path / "spec.yaml"
    assert_bad_input(integrate("spec", "derive", bad, "-o", out), "num_experts")
    assert not out.exists()
    assert list(tmp_path.iterdir()) == [bad]


def test_bad_spec_file(tmp_path):
    spec = tmp_path / "s.yaml"
    spec.write_text("name: x\nnum_layers: -3\n")
    assert_bad_input(integrate("spec", "show", spec), "s.yaml")
    spec.write_text("name: [unclosed\n")
    assert_bad_input(integrate("spec", "show", spec), "s.yaml", "YAML")


def test_tensor_in_two_shards(tmp_path):
    root = folder(tmp_path, index={"a": "s1.safetensors", "b": "s2.safetensors"})
    save_file({"a": torch.zeros(4)}, root / "s1.safetensors")
    save_file({"a": torch.zeros(4), "b": torch.zeros(4)}, root / "s2.safetensors")
    assert_bad_input(integrate("inspect", root), "'a'")
