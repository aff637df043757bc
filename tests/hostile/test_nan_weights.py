"""Issue 25 item 9: NaN or Inf weights are found as each tensor is read (a chunked finite scan), not after a whole
forward: the first such tensor stops the command in one line naming it and where the bad entry sits."""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner
from dayone.checkpoint import finite
from dayone.checkpoint.finite import check_finite
from dayone.checkpoint.reader import open_local
from dayone.cli import cli
from dayone.core.errors import InputError
from tiny_checkpoint import tiny_kimi_linear

POISONED = "model.layers.1.block_sparse_moe.experts.0.w1.weight"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    return tiny_kimi_linear(tmp_path_factory, "nan", layers=2)


def _poison(tiny: Path, root: Path, bits: int, element: int = 5) -> Path:
    """A copy of tiny whose POISONED (BF16) tensor holds the bf16 `bits` at flat index `element`."""
    shutil.copytree(tiny, root)
    shard = next(root.glob("*.safetensors"))
    raw = bytearray(shard.read_bytes())
    (length,) = struct.unpack("<Q", raw[:8])
    entry = json.loads(raw[8 : 8 + length])[POISONED]
    assert entry["dtype"] == "BF16"
    at = 8 + length + entry["data_offsets"][0] + 2 * element
    raw[at : at + 2] = struct.pack("<H", bits)
    shard.write_bytes(bytes(raw))
    return root


@pytest.mark.parametrize(("bits", "shown"), [(0x7FC0, "nan"), (0x7F80, "inf"), (0xFF80, "-inf")])
def test_golden_stops_at_the_poisoned_tensor(tiny, tmp_path, bits, shown):
    root = _poison(tiny, tmp_path / "ckpt", bits)
    out = tmp_path / "golden.safetensors"
    args = ["golden", str(root), "--tokens", "1,2,3", "--device", "cpu", "-o", str(out)]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2 and isinstance(result.exception, SystemExit), (result.output, result.exception)
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and POISONED in errors[0] and f"NaN or Inf ({shown} at [0, 5])" in errors[0], result.stderr
    assert not out.exists()


def test_the_reader_scans_what_it_reads(tiny, tmp_path):
    root = _poison(tiny, tmp_path / "ckpt", 0x7FC0)
    checkpoint = open_local(root)
    checkpoint.read("model.norm.weight")  # a clean tensor reads as before
    with pytest.raises(InputError, match=POISONED):
        checkpoint.read(POISONED)


@pytest.mark.parametrize(
    "dtype", [torch.float32, torch.bfloat16, torch.float16, torch.float8_e4m3fn, torch.float8_e5m2]
)
def test_check_finite_finds_the_first_bad_entry_across_chunks(monkeypatch, dtype):
    monkeypatch.setattr(finite, "CHUNK", 7)  # the bad entry sits in a later chunk than the first
    tensor = torch.zeros(4, 6, dtype=torch.float32)
    tensor[3, 2] = float("nan")
    tensor[3, 4] = float("nan")
    with pytest.raises(InputError, match=r"'w' contains NaN or Inf \(nan at \[3, 2\]\)"):
        check_finite(tensor.to(dtype), "w", "f")
    assert check_finite(torch.ones(4, 6).to(dtype), "w", "f") is not None


def test_integer_and_packed_tensors_pass_unscanned():
    for tensor in (torch.full((3,), 255, dtype=torch.uint8), torch.arange(4), torch.empty(0, 3)):
        assert check_finite(tensor, "w", "f") is tensor
