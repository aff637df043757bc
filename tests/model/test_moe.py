"""The MoE's one truth per op: the reference tier dequantizes and combines through the ops' references, the fast tier
through the public ops (the latent_combined capture included). The router's correction bias is fp32 in the fast tier
too, whatever the checkpoint dtype: the routing maths adds it to fp32 scores, and a bf16 copy would merge biases
closer than one bf16 step and change the top-k choice."""

from __future__ import annotations

import pytest
import torch
from dayone.adapters.model import Capture, SpecModel, WeightLoader
from dayone.spec.manifest import build_manifest
from model_fixtures import random_checkpoint, tiny_k3_spec, with_updates

BASE = 0.125  # a bf16 value: its step is 2^-10, so BASE + i * GAP (i < 8) all round to BASE in bf16
GAP = 1e-5


def test_fast_tier_correction_bias_is_fp32_and_routes_near_ties_like_the_reference(prompts):
    # an fp32 checkpoint: no role is "stored fp32 in a lower checkpoint", so only the module's declaration keeps it
    spec = with_updates(tiny_k3_spec(5), {"checkpoint": {"dtype": "float32"}})
    tensors = random_checkpoint(spec, seed=4)
    gen = torch.Generator().manual_seed(5)
    expected = {}
    for t in build_manifest(spec).tensors:
        if t.role == "moe.router":  # zero router: every score is sigmoid(0) = 0.5 in both tiers, the bias decides
            tensors[t.name] = torch.zeros(t.shape)
        elif t.role == "moe.correction_bias":
            bias = BASE + GAP * torch.randperm(spec.moe.num_experts, generator=gen).float()
            assert len(set(bias.bfloat16().tolist())) == 1  # bf16 cannot tell these biases apart
            tensors[t.name] = bias
            expected[f"layers.{t.layer}.own_topk_ids"] = bias.topk(spec.moe.experts_per_token).indices.sort().values
    assert len(expected) == spec.num_layers - 1  # every layer after the dense first one routes

    choices = {}
    for tier in ("reference", "fast"):
        model = SpecModel(spec, tier)
        WeightLoader(spec, tensors.__getitem__).load(model)
        for layer in model.layers[1:]:
            assert layer.ffn.router.e_score_correction_bias.dtype == torch.float32, tier
        choices[tier] = Capture("layers.*.own_topk_ids")
        with torch.inference_mode():
            model(*prompts, capture=choices[tier])

    tokens = sum(prompts[1])
    for name, ids in expected.items():
        assert torch.equal(choices["reference"][name], ids.expand(tokens, -1)), name
        assert torch.equal(choices["fast"][name], choices["reference"][name]), name


def _refuse(*args, **kwargs):
    raise AssertionError("public op called")


def test_reference_tier_runs_the_ops_references_and_the_fast_tier_the_public_ops(k3_5, prompts, monkeypatch):
    import dayone.kernels.moe_combine as combine_pkg
    import dayone.kernels.mxfp4 as mxfp4_pkg

    spec, tensors = k3_5
    models = {}
    for tier in ("reference", "fast"):
        models[tier] = SpecModel(spec, tier)
        WeightLoader(spec, tensors.__getitem__).load(models[tier])
    with monkeypatch.context() as patch:  # CPU auto would give the references too: only a refusal tells them apart
        for pkg, op in ((combine_pkg, "moe_combine"), (mxfp4_pkg, "dequantize_mxfp4"), (mxfp4_pkg, "mxfp4_linear")):
            patch.setattr(pkg, op, _refuse)
        with torch.inference_mode():
            models["reference"](*prompts)
        with pytest.raises(AssertionError, match="public op called"), torch.inference_mode():
            models["fast"](*prompts)

    # the fast tier's latent_combined comes from the op, not from a recount beside it: a defect in the op shows there
    def latent_combined() -> torch.Tensor:
        cap = Capture("layers.1.latent_combined")
        with torch.inference_mode():
            models["fast"](*prompts, capture=cap)
        return cap["layers.1.latent_combined"]

    right = latent_combined()
    original = combine_pkg.moe_combine
    monkeypatch.setattr(combine_pkg, "moe_combine", lambda *args, **kwargs: original(*args, **kwargs) * 2)
    doubled = latent_combined()
    assert right.dtype == torch.float32 and torch.equal(doubled, 2 * right)  # x2 is exact in fp32
