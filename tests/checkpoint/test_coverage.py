"""Full-size skeletons: the release's shard names and headers, sparse data; coverage names what is off."""

import json
from pathlib import Path

import pytest
from cli_runner import integrate
from dayone.checkpoint.writer import write_checkpoint
from dayone.spec.hf_config import to_hf_config
from dayone.spec.manifest import Tensor, build_manifest
from dayone.spec.registry import load_spec


@pytest.fixture(scope="module")
def kl_spec():
    return load_spec("kimi-linear-48b-a3b")


def skeleton(path: Path, spec, tensors: list[Tensor]) -> Path:
    return write_checkpoint(path, to_hf_config(spec), tensors, spec.release.num_shards)


def inspect_json(path: Path, *extra: str) -> tuple[int, dict]:
    result = integrate("inspect", path, "--json", *extra)
    assert result.code in (0, 1), result.err
    return result.code, json.loads(result.out)


def test_full_size_k3_skeleton_is_fully_covered(tmp_path):
    out = tmp_path / "k3"
    result = integrate("synth", "kimi-k3", "--skeleton", "-o", out)
    assert result.code == 0, result.err
    shards = sorted(p.name for p in out.glob("*.safetensors"))
    assert len(shards) == 96 and shards[0] == "model-00001-of-00096.safetensors"
    apparent = sum(p.stat().st_size for p in out.glob("*.safetensors"))
    on_disk = sum(p.stat().st_blocks * 512 for p in out.glob("*.safetensors"))
    assert apparent > 1.56e12 and on_disk < 1e9  # full size, sparse
    code, report = inspect_json(out, "--spec", "kimi-k3")
    assert code == 0 and report["ok"]
    assert (report["tensors"], report["bytes"]) == (497_220, 1_560_860_324_864)
    assert report["missing"] == report["unexpected"] == []
    # Derivation from the skeleton's own config.json gives the same verdict.
    code, derived = inspect_json(out)
    assert code == 0 and derived["expected_tensors"] == 497_220


def test_dropped_tensor_is_named(tmp_path, kl_spec):
    tensors = list(build_manifest(kl_spec).tensors)
    dropped = "model.layers.7.block_sparse_moe.experts.42.w2.weight"
    out = skeleton(tmp_path / "kl", kl_spec, [t for t in tensors if t.name != dropped])
    code, report = inspect_json(out)
    assert code == 1 and not report["ok"]
    assert report["missing"] == [dropped]


def test_thousands_of_missing_tensors_group_into_one_pattern(tmp_path, kl_spec):
    tensors = [t for t in build_manifest(kl_spec).tensors if not t.name.endswith(".w2.weight")]
    code, report = inspect_json(skeleton(tmp_path / "kl", kl_spec, tensors))
    assert code == 1
    assert report["missing"] == ["model.layers.{1..26}.block_sparse_moe.experts.{0..255}.w2.weight"]
    assert report["counts"]["missing"] == 26 * 256


def test_wrong_shape_and_dtype_are_named(tmp_path, kl_spec):
    tensors = []
    for t in build_manifest(kl_spec).tensors:
        if t.name == "model.layers.3.self_attn.kv_b_proj.weight":
            t = t._replace(shape=(8192, 256))
        if t.name == "model.layers.0.self_attn.A_log":
            t = t._replace(dtype="BF16")
        tensors.append(t)
    code, report = inspect_json(skeleton(tmp_path / "kl", kl_spec, tensors))
    assert code == 1
    assert report["mismatched"]["shape"] == [
        "model.layers.3.self_attn.kv_b_proj.weight: expected [8192, 512], found [8192, 256]"
    ]
    # A float stored in another float dtype is a finding (issue 14: transformers' bf16 Kimi Linear keeps A_log in bf16)
    assert report["mismatched"]["dtype"] == []
    assert report["findings"]["dtype"] == [
        "model.layers.0.self_attn.A_log: stored as BF16, the spec expects F32: used as stored"
    ]


def test_unexpected_tensor_is_named(tmp_path, kl_spec):
    tensors = [*build_manifest(kl_spec).tensors, Tensor("model.layers.3.self_attn.rotary.inv_freq", (32,), "F32", "x")]
    code, report = inspect_json(skeleton(tmp_path / "kl", kl_spec, tensors))
    assert code == 1 and report["unexpected"] == ["model.layers.3.self_attn.rotary.inv_freq"]


def test_hub_repo_from_the_offline_cache(tmp_path, kl_spec):
    """owner/name@revision resolves through huggingface_hub's cache layout with HF_HUB_OFFLINE=1."""
    revision = "0123456789abcdef0123456789abcdef01234567"
    cache = tmp_path / "hub"
    snapshot = cache / "models--moonshotai--Kimi-Linear-48B-A3B-Instruct" / "snapshots" / revision
    # Written in place: a plain copy would fill in the sparse data regions (98 GB).
    skeleton(snapshot, kl_spec, list(build_manifest(kl_spec).tensors))
    env = {"HF_HUB_CACHE": str(cache), "HF_HUB_OFFLINE": "1"}
    result = integrate("inspect", f"moonshotai/Kimi-Linear-48B-A3B-Instruct@{revision}", "--json", env=env)
    assert result.code == 0, result.err
    assert json.loads(result.out)["tensors"] == 20_493
    missing = integrate("inspect", "moonshotai/Kimi-Linear-48B-A3B-Instruct@" + "f" * 40, env=env)
    assert missing.code == 2 and "Traceback" not in missing.err and len(missing.err.strip().splitlines()) == 1


def test_skeleton_refuses_to_overwrite(tmp_path):
    out = tmp_path / "taken"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    result = integrate("synth", "kimi-linear-48b-a3b", "--skeleton", "-o", out)
    assert result.code == 2 and (out / "keep.txt").read_text() == "mine"
