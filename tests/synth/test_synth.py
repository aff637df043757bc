"""integrate synth --scale: the release's names, dtypes, shards and config, real weights, deterministic by seed,
activations well-scaled through all 93 K3 layers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from cli_runner import assert_bad_input, integrate
from dayone.spec.derive import derive_spec
from dayone.spec.registry import load_spec
from dayone.synth import scaled_spec
from safetensors_folder import read_folder

ONE_THREAD = {"OMP_NUM_THREADS": "1"}
PREFIX = "language_model.model."


@pytest.fixture(scope="module")
def k3_tiny(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("synth") / "k3"
    result = integrate("synth", "kimi-k3", "--scale", "tiny", "-o", out, env=ONE_THREAD)
    assert result.code == 0, result.err
    return out


def test_release_format(k3_tiny):
    files = sorted(p.name for p in k3_tiny.iterdir())
    assert files[0] == "config.json" and "model.safetensors.index.json" in files
    shards = [f for f in files if f.endswith(".safetensors")]
    assert len(shards) == 96 and shards[0] == "model-00001-of-00096.safetensors"
    inspect = integrate("inspect", k3_tiny, "--json", env=ONE_THREAD)
    assert inspect.code == 0, inspect.out
    config = json.loads((k3_tiny / "config.json").read_text())
    assert config["model_type"] == "kimi_k3" and config["text_config"]["num_hidden_layers"] == 93
    assert config["text_config"]["quantization_config"]["format"] == "mxfp4-pack-quantized"
    tensors = read_folder(k3_tiny)
    a_log = tensors[PREFIX + "layers.0.self_attn.A_log"]
    assert a_log.dtype == torch.float32 and a_log.shape == (128,)
    assert bool((a_log[2:] == 0).all()) and bool((a_log[:2] != 0).all())  # 2 heads used, zero padding
    expert = PREFIX + "layers.1.block_sparse_moe.experts.7.w2."
    assert (
        tensors[expert + "weight_packed"].dtype == torch.uint8 and tensors[expert + "weight_scale"].dtype == torch.uint8
    )
    assert tensors[PREFIX + "layers.1.self_attn.q_conv1d.weight"].dtype == torch.float32
    assert tensors[PREFIX + "embed_tokens.weight"].dtype == torch.bfloat16
    assert any(name.startswith("vision_tower.encoder.blocks.26.") for name in tensors)
    assert "mm_projector.proj.2.weight" in tensors


def test_config_derives_the_scaled_spec(k3_tiny):
    """spec derive on the synthetic checkpoint gives back the spec it was written from (name and release aside)."""
    config = json.loads((k3_tiny / "config.json").read_text())
    expected = scaled_spec(load_spec("kimi-k3"), "tiny")
    derived = derive_spec(config, expected.name, num_shards=96)
    assert derived.model_dump(exclude={"release"}) == expected.model_dump(exclude={"release"})
    result = integrate("spec", "derive", k3_tiny, env=ONE_THREAD)
    assert result.code == 0 and "num_layers: 93" in result.out


def test_same_seed_same_bytes(tmp_path):
    runs = {}
    for name, seed in (("a", 3), ("b", 3), ("c", 4)):
        result = integrate("synth", "kimi-k3", "--scale", "tiny", "--layers", "5", "--seed", seed, "--shards", "3",
                           "-o", tmp_path / name, env=ONE_THREAD)  # fmt: skip
        assert result.code == 0, result.err
        runs[name] = {p.name: p.read_bytes() for p in sorted((tmp_path / name).iterdir())}
    assert runs["a"] == runs["b"]
    assert runs["a"]["config.json"] == runs["c"]["config.json"]
    assert runs["a"]["model-00001-of-00003.safetensors"] != runs["c"]["model-00001-of-00003.safetensors"]
    config = json.loads(runs["a"]["config.json"])
    assert config["text_config"]["num_hidden_layers"] == 5


def test_activations_stay_well_scaled(k3_tiny):
    """Every layer of the 93 moves the state by a similar amount and the state keeps its size: no layer is dead,
    none explodes (the reference tier, fp32)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        _check_scales(k3_tiny)
    finally:
        torch.set_num_threads(threads)


def _check_scales(k3_tiny) -> None:
    from dayone.adapters.model import Capture, SpecModel, WeightLoader
    from dayone.checkpoint import open_checkpoint
    from dayone.checkpoint.spec_source import spec_for_checkpoint

    ckpt = open_checkpoint(str(k3_tiny))
    spec = spec_for_checkpoint(ckpt, None)
    model = SpecModel(spec, "reference")
    WeightLoader(spec, read_folder(k3_tiny).__getitem__).load(model)
    ids = torch.randint(0, 252, (1, 24), generator=torch.Generator().manual_seed(0))
    cap = Capture("layers.*.attn_out", "layers.*.mlp_out", "layers.*.attn_res", "logits")
    model(ids, capture=cap)

    def rms(x):
        return float(x.float().pow(2).mean().sqrt())

    for kind in ("attn_out", "mlp_out"):
        sizes = [rms(cap[f"layers.{i}.{kind}"]) for i in range(93)]
        assert 0.03 < min(sizes) and max(sizes) < 0.3 and max(sizes) / min(sizes) < 4, (kind, sizes)
    # a softmax mix of up to 9 nearly uncorrelated snapshot rows: it shrinks as more snapshots join, never collapses
    mixed = [rms(cap[f"layers.{i}.attn_res"]) for i in range(1, 93)]
    assert 0.1 < min(mixed) and max(mixed) < 1.5, mixed
    assert 1.0 < rms(cap["logits"]) < 4.0


def test_kimi_linear_scale(tmp_path):
    out = tmp_path / "kl"
    result = integrate("synth", "kimi-linear-48b-a3b", "--scale", "small", "--layers", "4", "-o", out, env=ONE_THREAD)
    assert result.code == 0, result.err
    config = json.loads((out / "config.json").read_text())
    assert config["model_type"] == "kimi_linear" and config["hidden_size"] == 256
    tensors = read_folder(out)
    assert tensors["model.layers.0.self_attn.A_log"].shape == (1, 1, 4, 1)
    assert tensors["model.layers.1.block_sparse_moe.experts.0.w1.weight"].dtype == torch.bfloat16
    assert integrate("inspect", out, env=ONE_THREAD).code == 0


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["kimi-k3", "-o", "X"], "exactly one of --scale"),
        (["kimi-k3", "--scale", "tiny", "--skeleton", "-o", "X"], "exactly one of --scale"),
        (["kimi-k3", "--scale", "tiny", "--layers", "0", "-o", "X"], "--layers 0"),
        (["no-such-spec", "--scale", "tiny", "-o", "X"], "no-such-spec"),
    ],
)
def test_bad_arguments(tmp_path, args, fragment):
    args = [str(tmp_path / "out") if a == "X" else a for a in args]
    assert_bad_input(integrate("synth", *args, env=ONE_THREAD), fragment)
    assert not (tmp_path / "out").exists()
