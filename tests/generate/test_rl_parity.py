"""RL parity in our own runtime: the trainer's forward (Megatron layout from the generated Miles converter, packed
sequences, autograd) against the rollout engine's prefill + cached decode, as Miles measures it."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from dayone.adapters.rl import TrainingModel, parity, rollout
from dayone.adapters.targets import common, miles
from dayone.adapters.weightmap import walk
from generate_fixtures import load

LIMIT = 1e-5  # fp32 on the tiny K3: the bound for both numbers


@pytest.fixture(scope="module")
def convert(small_k3, tmp_path_factory):
    """The generated Miles converter for the small K3: HF -> Megatron parameters (TP 1, EP 1, fp32)."""
    spec, _ = small_k3
    root = tmp_path_factory.mktemp("miles")
    common.write_tree(root, miles.files(spec))
    return load(root, "dayone_kimi_k3_miles.convert")


@pytest.fixture(scope="module")
def prompts():
    gen = torch.Generator().manual_seed(5)
    return [torch.randint(3, 128, (n,), generator=gen) for n in (9, 4, 6)]


def test_train_rollout_logprobs_agree(small_k3, convert, prompts):
    spec, tensors = small_k3

    def to_megatron(get):
        return convert.load_hf(get, dtype=torch.float32)

    report = parity(spec, tensors, prompts, response_len=6, convert=to_megatron)
    print(report)
    assert report["tokens"] == 18
    assert report["train_rollout_logprob_abs_diff"] < LIMIT
    assert report["train_rollout_logprob_abs_diff_max"] < LIMIT
    assert 0 <= report["train_rollout_kl"] < LIMIT


def test_training_forward_has_gradients_in_the_megatron_layout(small_k3, convert, prompts):
    spec, tensors = small_k3
    model = TrainingModel.from_checkpoint(spec, tensors, lambda get: convert.load_hf(get, dtype=torch.float32))
    logprobs = model([torch.cat([p, p]) for p in prompts])
    (-torch.cat(logprobs).sum()).backward()
    params = model.megatron_params()
    grads = {name: p.grad for name, p in params.items()}
    assert all(g is None or bool(torch.isfinite(g).all()) for g in grads.values())
    for name in ("embedding.word_embeddings.weight", "decoder.layers.0.mlp.linear_fc1.weight",
                 "decoder.layers.1.self_attention.in_proj.weight", "decoder.layers.3.self_attention.linear_kv_up_proj.weight",
                 "decoder.layers.2.mlp.fc2_latent_proj.weight", "decoder.layers.1.attn_res.proj.weight"):  # fmt: skip
        assert grads[name] is not None and float(grads[name].abs().sum()) > 0, name


def test_a_swapped_gate_and_up_shows_in_the_logprobs(small_k3, convert, prompts):
    """The training model reads linear_fc1 as [gate; up] itself, so a table that swaps them is caught here too."""
    spec, tensors = small_k3
    t = convert.weight_table
    swapped = SimpleNamespace(
        LAYERS=t.LAYERS, NUM_EXPERTS=t.NUM_EXPERTS, PARAMS=t.PARAMS, DERIVED=t.DERIVED,
        RULES=tuple(r._replace(part=1 - r.part) if r.source.endswith(("mlp.gate_proj.weight", "mlp.up_proj.weight"))
                    else r for r in t.RULES),
    )  # fmt: skip
    ro = rollout(spec, tensors, prompts, response_len=3)
    good = TrainingModel.from_checkpoint(spec, tensors, lambda get: convert.load_hf(get, dtype=torch.float32))
    bad = TrainingModel(spec, walk.to_target(swapped, tensors.__getitem__, dtype=torch.float32))
    seqs = ro.sequences()
    with torch.no_grad():
        gap = max(float((a - b).abs().max()) for a, b in zip(good(seqs), bad(seqs)))
    assert gap > 1e-2
