"""integrate convert mxfp4-to-bf16: bitwise equal to the reference, ranks equal one process, resumable, strict."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from cli_runner import assert_bad_input, integrate
from dayone.checkpoint import open_checkpoint
from dayone.checkpoint.writer import write_checkpoint
from dayone.convert.dequant import dequantize, pair_table
from dayone.convert.pieces import Dequant, Piece
from dayone.convert.stream import write_stream
from dayone.kernels.mxfp4.reference import dequantize_mxfp4_reference, quantize_mxfp4
from dayone.spec.derive import derive_spec
from dayone.spec.hf_config import to_hf_config
from dayone.spec.manifest import build_manifest
from safetensors import safe_open
from safetensors_folder import read_folder
from tools_fixtures import tensor_bytes, write_split_pair

CONVERT = ("convert", "mxfp4-to-bf16")


def files_of(folder: Path) -> dict[str, bytes]:
    """Every visible file's bytes (the .dayone-convert records hold source mtimes and are left out)."""
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file() and not p.name.startswith(".")}


@pytest.fixture(scope="module")
def converted(k3_dir, tmp_path_factory):
    dst = tmp_path_factory.mktemp("convert") / "bf16"
    result = integrate(*CONVERT, k3_dir, "-o", dst, "--json")
    assert result.code == 0, result.err
    return dst, json.loads(result.out)


def test_equals_reference_dequantization_bitwise(k3_dir, converted):
    dst, report = converted
    source, output = read_folder(k3_dir), read_folder(dst)
    pairs = [name.removesuffix(".weight_packed") for name in source if name.endswith(".weight_packed")]
    assert pairs and report["dequantized"] == len(pairs) and report["converted"] == 3
    assert set(output) == (set(source) - {f"{b}.weight_{s}" for b in pairs for s in ("packed", "scale")}) | {
        f"{b}.weight" for b in pairs
    }
    for base in pairs:
        expected = dequantize_mxfp4_reference(source[f"{base}.weight_packed"], source[f"{base}.weight_scale"])
        got = output[f"{base}.weight"]
        assert got.dtype == torch.bfloat16
        assert torch.equal(got.view(torch.int16), expected.view(torch.int16)), base
    for name, tensor in source.items():
        if not name.endswith((".weight_packed", ".weight_scale")):
            assert output[name].dtype == tensor.dtype
            assert torch.equal(output[name].view(torch.uint8), tensor.view(torch.uint8)), name


def test_shard_names_config_and_side_files(k3_dir, converted):
    dst, _ = converted
    src_shards = sorted(p.name for p in k3_dir.glob("*.safetensors"))
    assert sorted(p.name for p in dst.glob("*.safetensors")) == src_shards
    config = json.loads((dst / "config.json").read_text())
    assert "quantization_config" not in config and "quantization_config" not in config["text_config"]
    source_config = json.loads((k3_dir / "config.json").read_text())
    source_config["text_config"].pop("quantization_config")
    assert config == source_config
    assert (dst / "tokenizer_config.json").read_bytes() == (k3_dir / "tokenizer_config.json").read_bytes()
    index = json.loads((dst / "model.safetensors.index.json").read_text())
    ckpt = open_checkpoint(str(dst))
    assert index["weight_map"] == {name: info.file for name, info in ckpt.tensors.items()}
    assert index["metadata"]["total_size"] == ckpt.nbytes


def test_output_inspects_as_the_spec_without_quantization(k3_spec, converted):
    dst, _ = converted
    result = integrate("inspect", dst, "--json")
    assert result.code == 0, result.out[-2000:] + result.err
    assert json.loads(result.out)["ok"]
    ckpt = open_checkpoint(str(dst))
    derived = derive_spec(ckpt.config, k3_spec.name, tensor_names=ckpt.names())
    assert derived == k3_spec.model_copy(update={"quantization": None})


def test_two_ranks_then_finalize_equal_one_process(k3_dir, converted, tmp_path):
    dst = tmp_path / "ranks"
    procs = [
        subprocess.Popen(
            [sys.executable, "-P", "-m", "dayone", *CONVERT, str(k3_dir), "-o", str(dst), "--shard-rank", str(r),
             "--num-shards", "2", "--json"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        for r in range(2)
    ]  # fmt: skip
    reports = []
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        reports.append(json.loads(out))
    assert [r["converted"] for r in reports] == [2, 1]  # rank 0: files 1 and 3, rank 1: file 2
    assert "finalized" not in reports[0] and not (dst / "model.safetensors.index.json").exists()
    result = integrate(*CONVERT, k3_dir, "-o", dst, "--finalize")
    assert result.code == 0, result.err
    assert files_of(dst) == files_of(converted[0])


def test_torchrun_job_equals_one_process(k3_dir, converted, tmp_path):
    """One torchrun job: each rank converts its files, rank 0 finalizes after the gloo all-reduce."""
    dst = tmp_path / "torchrun"
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
         "-m", "dayone", *CONVERT, str(k3_dir), "-o", str(dst)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, start_new_session=True,
    )  # fmt: skip
    try:
        out, err = proc.communicate(timeout=180)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # the launcher and its workers, nothing else
        proc.communicate()
        raise
    assert proc.returncode == 0, err[-3000:]
    assert "rank 0: finalized" in out
    assert files_of(dst) == files_of(converted[0])


def test_rerun_skips_finished_and_redoes_damaged_files(k3_dir, converted, tmp_path):
    dst = tmp_path / "rerun"
    first = integrate(*CONVERT, k3_dir, "-o", dst, "--json")
    assert first.code == 0, first.err
    reference = files_of(dst)
    again = json.loads(integrate(*CONVERT, k3_dir, "-o", dst, "--json").out)
    assert (again["converted"], again["skipped"]) == (0, 3)

    shards = sorted(dst.glob("model-*.safetensors"))
    with open(shards[0], "r+b") as f:  # truncated, as by a full disk
        f.truncate(os.path.getsize(shards[0]) - 100)
    with open(shards[1], "r+b") as f:  # same size, header overwritten
        f.seek(10)
        f.write(b"garbage!")
    (dst / ".model-00003-of-00003.safetensors.tmp-999").write_bytes(b"left by a killed run")
    redo = json.loads(integrate(*CONVERT, k3_dir, "-o", dst, "--json").out)
    assert (redo["converted"], redo["skipped"]) == (2, 1)
    assert sorted(f["file"] for f in redo["per_file"] if f["status"] == "converted") == [s.name for s in shards[:2]]
    assert files_of(dst) == reference
    assert not list(dst.glob(".*.tmp-*"))


def test_stream_dequantizes_in_row_blocks(tmp_path):
    """Blocks of rows with a short last block give the same bytes as one whole-tensor dequantization."""
    gen = torch.Generator().manual_seed(3)
    packed = torch.randint(0, 256, (37, 48), generator=gen, dtype=torch.uint8)
    scale = torch.randint(0, 256, (37, 3), generator=gen, dtype=torch.uint8)
    src = tmp_path / "raw"
    src.write_bytes(packed.numpy().tobytes() + scale.numpy().tobytes())
    piece = Piece("w.weight", "BF16", (37, 96), Dequant(src, 0, src, packed.numel(), 37, 48, 3))
    write_stream(tmp_path / "out.safetensors", [piece], {"format": "pt"}, chunk_bytes=5 * 48 * 4)
    with safe_open(tmp_path / "out.safetensors", framework="pt") as f:
        got = f.get_tensor("w.weight")
    expected = dequantize_mxfp4_reference(packed, scale)
    assert torch.equal(got.view(torch.int16), expected.view(torch.int16))
    assert torch.equal(dequantize(packed, scale).view(torch.int16), expected.view(torch.int16))


def test_failed_write_raises_and_leaves_nothing(tmp_path, monkeypatch):
    """A write failing on the background writer (a full disk) surfaces in the caller; no file, no temporary."""
    from dayone.convert import stream

    packed = torch.randint(0, 256, (64, 48), dtype=torch.uint8)
    scale = torch.full((64, 3), 127, dtype=torch.uint8)
    src = tmp_path / "raw"
    src.write_bytes(packed.numpy().tobytes() + scale.numpy().tobytes())
    calls = []

    def failing(fd, data):
        calls.append(len(data))
        if len(calls) == 3:
            raise OSError(28, "No space left on device")
        os.write(fd, data)

    monkeypatch.setattr(stream, "_write_all", failing)
    pieces = [
        Piece(f"w{i}.weight", "BF16", (64, 96), Dequant(src, 0, src, packed.numel(), 64, 48, 3)) for i in range(4)
    ]
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(OSError, match="No space"):
        write_stream(out / "x.safetensors", pieces, {}, chunk_bytes=8 * 96 * 2)
    assert list(out.iterdir()) == []


def test_table_matches_reference_on_quantized_weights():
    weight = torch.randn(64, 256, generator=torch.Generator().manual_seed(0)) * 1e-3
    packed, scale = quantize_mxfp4(weight)
    expected = dequantize_mxfp4_reference(packed, scale)
    assert torch.equal(dequantize(packed, scale).view(torch.int16), expected.view(torch.int16))
    assert pair_table().shape == (65536,)


def test_pair_split_across_files(k3_spec, tmp_path):
    """A sharded writer may cut between a weight_packed and its weight_scale: the BF16 weight goes to the packed
    tensor's file, reading the scale from the other one, and each rank still converts only its own file."""
    base = "language_model.model.layers.1.block_sparse_moe.experts.0.w1"
    src = write_split_pair(tmp_path / "src", k3_spec, f"{base}.weight_packed")
    for rank in range(2):
        args = ("--shard-rank", str(rank), "--num-shards", "2")
        assert integrate(*CONVERT, src, "-o", tmp_path / "out", *args).code == 0
    assert integrate(*CONVERT, src, "-o", tmp_path / "out", "--finalize").code == 0
    source, output = read_folder(src), read_folder(tmp_path / "out")
    expected = dequantize_mxfp4_reference(source[f"{base}.weight_packed"], source[f"{base}.weight_scale"])
    assert torch.equal(output[f"{base}.weight"].view(torch.int16), expected.view(torch.int16))
    index = json.loads((tmp_path / "out" / "model.safetensors.index.json").read_text())["weight_map"]
    assert index[f"{base}.weight"] == "model-00001-of-00002.safetensors"
    assert f"{base}.weight_scale" not in index


def write_without(path: Path, spec, drop: str) -> Path:
    tensors = [t for t in build_manifest(spec).tensors if t.name != drop]
    return write_checkpoint(path, to_hf_config(spec), tensors, 2, data=lambda t: tensor_bytes(t, 0))


@pytest.mark.parametrize("suffix", ["weight_packed", "weight_scale"])
def test_half_pair_is_bad_input_naming_the_tensor(k3_spec, tmp_path, suffix):
    base = "language_model.model.layers.1.block_sparse_moe.experts.0.w2"
    src = write_without(tmp_path / "src", k3_spec, f"{base}.{suffix}")
    twin = "weight_scale" if suffix == "weight_packed" else "weight_packed"
    assert_bad_input(integrate(*CONVERT, src, "-o", tmp_path / "out"), f"{base}.{twin}", "has no twin")
    assert not any((tmp_path / "out").glob("*.safetensors"))


def test_bad_inputs(k3_dir, tmp_path):
    assert_bad_input(integrate(*CONVERT, tmp_path / "missing", "-o", tmp_path / "out"), "missing")
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "notes.txt").write_text("mine")
    assert_bad_input(integrate(*CONVERT, k3_dir, "-o", busy), "busy", "not empty", "--overwrite")
    assert (busy / "notes.txt").read_text() == "mine" and len(list(busy.iterdir())) == 1
    out = tmp_path / "out"
    assert_bad_input(integrate(*CONVERT, k3_dir, "-o", out, "--shard-rank", "2", "--num-shards", "2"), "--shard-rank")
    assert_bad_input(integrate(*CONVERT, k3_dir, "-o", out, "--shard-rank", "0"), "--num-shards")
    assert_bad_input(
        integrate(*CONVERT, k3_dir, "-o", out, "--shard-rank", "0", "--num-shards", "2", "--finalize"), "--finalize"
    )
    assert_bad_input(integrate(*CONVERT, k3_dir, "-o", out, "--finalize"), "no conversion to finalize")
    assert integrate(*CONVERT, k3_dir, "-o", out, "--shard-rank", "1", "--num-shards", "2").code == 0
    assert_bad_input(integrate(*CONVERT, k3_dir, "-o", out, "--finalize"), "model-00001-of-00003", "not converted")
    assert_bad_input(integrate(*CONVERT, k3_dir, "-o", k3_dir), "source folder")
