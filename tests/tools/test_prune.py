"""integrate prune: renumbered layers, sliced experts and router, a config every tool accepts, --cover."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from cli_runner import assert_bad_input, integrate
from dayone.checkpoint import open_checkpoint
from dayone.checkpoint.spec_source import spec_for_checkpoint
from dayone.prune import cover, parse_layers, select
from dayone.prune.layers import combo
from dayone.spec.registry import load_spec
from safetensors_folder import read_folder

PREFIX = "language_model.model."


def same(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(a.view(torch.uint8), b.view(torch.uint8))


def prune(src, dst, *args):
    result = integrate("prune", src, "-o", dst, "--json", *args)
    assert result.code == 0, result.err
    return json.loads(result.out)


def inspect_ok(folder: Path) -> dict:
    result = integrate("inspect", folder, "--json")
    assert result.code == 0, result.out[-2000:] + result.err
    return json.loads(result.out)


@pytest.fixture(scope="module")
def first_four(k3_dir, tmp_path_factory):
    dst = tmp_path_factory.mktemp("prune") / "first4"
    return dst, prune(k3_dir, dst, "--layers", "0-3", "--experts", "3")


def test_prefix_prune_inspects_and_keeps_the_source_numbers(k3_dir, k3_spec, first_four):
    dst, report = first_four
    assert inspect_ok(dst)["num_layers"] == 4
    text = json.loads((dst / "config.json").read_text())["text_config"]
    assert text["num_hidden_layers"] == 4 and text["first_k_dense_replace"] == 1
    assert text["linear_attn_config"]["kda_layers"] == [1, 2, 3]
    assert text["linear_attn_config"]["full_attn_layers"] == [4]
    assert (text["num_experts"], text["num_experts_per_token"]) == (3, 2)
    assert text["attn_res_block_size"] == 12 and report["snapshot_moved"] == []  # a prefix keeps the block size
    assert "quantization_config" in text
    source, output = read_folder(k3_dir), read_folder(dst)
    for name, tensor in output.items():
        if name.endswith(("gate.weight", "gate.e_score_correction_bias")) and ".block_sparse_moe." in name:
            assert same(tensor, source[name][:3]), name  # the router's first 3 experts
        else:
            assert same(tensor, source[name]), name  # layers 0-3 keep their numbers
    assert not any(".experts.3." in name for name in output)
    assert any(".experts.2.w2.weight_packed" in name for name in output)
    vision = [name for name in source if name.startswith(("vision_tower.", "mm_projector."))]
    assert vision and all(name in output for name in vision)
    for name in (
        f"{PREFIX}embed_tokens.weight",
        "language_model.lm_head.weight",
        f"{PREFIX}output_attn_res_proj.weight",
    ):
        assert same(output[name], source[name])
    assert (dst / "tokenizer_config.json").is_file()


def test_cover_keeps_every_combination_and_what_each_layer_does(k3_dir, k3_spec, tmp_path):
    report = prune(k3_dir, tmp_path / "cover", "--cover", "--experts", "2")
    assert inspect_ok(tmp_path / "cover")["ok"]
    ckpt = open_checkpoint(str(tmp_path / "cover"))
    pruned = spec_for_checkpoint(ckpt, None)
    wanted = {combo(layer) for layer in k3_spec.layers}
    assert {combo(layer) for layer in pruned.layers} == wanted
    assert len(report["layers"]) == len(wanted)  # one layer per combination: the smallest possible
    for layer, source in zip(pruned.layers, report["layers"], strict=True):
        assert combo(layer) == combo(k3_spec.layers[source])
    source, output = read_folder(k3_dir), read_folder(tmp_path / "cover")
    for new, old in enumerate(report["layers"]):
        name = f"{PREFIX}layers.{new}.self_attn.o_proj.weight"
        assert same(output[name], source[f"{PREFIX}layers.{old}.self_attn.o_proj.weight"])


def test_cover_of_the_real_k3_spec():
    """K3: dense+kda+snapshot (0), kda+moe (1), mla+moe (3), kda+moe+snapshot (12); block 3 keeps 12's snapshot."""
    spec = load_spec("kimi-k3")
    selection = cover(spec, dense_first=True)
    assert (selection.layers, selection.block_size) == ((0, 1, 3, 12), 3)
    assert {combo(spec.layers[i]) for i in selection.layers} == {combo(layer) for layer in spec.layers}


def test_block_size_rule():
    spec = load_spec("kimi-k3")
    assert select(spec, parse_layers("0-3", 93)).block_size == 12  # prefix: the source's own block size
    assert select(spec, parse_layers("0,12", 93)).block_size == 1
    assert select(spec, parse_layers("0,1,12,13", 93)).block_size == 2
    moved = select(spec, parse_layers("1-2", 93))  # new layer 0 always snapshots: nothing preserves layer 1
    assert (moved.block_size, moved.moved) == (12, (1,))


def test_kimi_linear_prune_and_cover(kimi_linear_dir, tmp_path):
    report = prune(kimi_linear_dir, tmp_path / "kl", "--cover", "--experts", "2")
    assert report["layers"] == [0, 1, 3] and report["attn_res_block_size"] is None
    assert inspect_ok(tmp_path / "kl")["num_layers"] == 3
    config = json.loads((tmp_path / "kl" / "config.json").read_text())
    assert config["num_experts"] == 2 and config["num_experts_per_token"] == 2


def test_prune_of_a_converted_checkpoint(k3_dir, tmp_path):
    assert integrate("convert", "mxfp4-to-bf16", k3_dir, "-o", tmp_path / "bf16").code == 0
    prune(tmp_path / "bf16", tmp_path / "small", "--layers", "0,1,3,12", "--experts", "4")
    assert inspect_ok(tmp_path / "small")["ok"]


@pytest.mark.parametrize(
    ("layers", "fragment"),
    [("3-1", "backwards"), ("x", "'x'"), ("0-25", "past the last layer"), ("0,0", "twice"), ("", "''")],
)
def test_bad_layers(k3_dir, tmp_path, layers, fragment):
    assert_bad_input(integrate("prune", k3_dir, "-o", tmp_path / "out", "--layers", layers), "--layers", fragment)
    assert not (tmp_path / "out").exists()


def test_bad_inputs(k3_dir, tmp_path):
    out = tmp_path / "out"
    assert_bad_input(integrate("prune", tmp_path / "missing", "-o", out, "--layers", "0"), "missing")
    assert_bad_input(integrate("prune", k3_dir, "-o", out), "--layers or --cover")
    assert_bad_input(integrate("prune", k3_dir, "-o", out, "--layers", "0", "--cover"), "--layers or --cover")
    assert_bad_input(integrate("prune", k3_dir, "-o", out, "--layers", "0-1", "--experts", "0"), "--experts 0")
    assert_bad_input(integrate("prune", k3_dir, "-o", out, "--layers", "0-1", "--experts", "9"), "--experts 9")
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "notes.txt").write_text("mine")
    assert_bad_input(integrate("prune", k3_dir, "-o", busy, "--layers", "0-1"), "not empty", "--overwrite")
    assert [p.name for p in busy.iterdir()] == ["notes.txt"]
    assert_bad_input(integrate("prune", k3_dir, "-o", k3_dir, "--layers", "0-1", "--overwrite"), "source folder")
