"""The model against transformers' independent kimi_linear (torch path, fp32, eval) on checkpoints it wrote."""

from __future__ import annotations

import torch
from dayone.adapters.model import Capture, SpecModel, WeightLoader
from dayone.core.numerics import assert_close


def _run(spec, tensors, tier, ids, capture=None):
    model = SpecModel(spec, tier)
    WeightLoader(spec, tensors.__getitem__).load(model)
    return model(ids, capture=capture)


def test_reference_tier_matches_transformers(kimi_linear):
    hf, spec, tensors = kimi_linear
    ids = torch.randint(3, spec.vocab_size, (2, 11), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        expected = hf(ids).logits
    result = assert_close(_run(spec, tensors, "reference", ids), expected, "fp32_oracle", "reference vs transformers")
    print(f"reference vs transformers: {result.describe()}")
    assert result.max_abs <= 1e-4


def test_fast_tier_matches_transformers(kimi_linear):
    hf, spec, tensors = kimi_linear
    ids = torch.randint(3, spec.vocab_size, (2, 11), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        expected = hf(ids).logits
    # Route as the reference tier does (it matches transformers to 1e-7): a near-tie in the router that bf16
    # rounding flips is a discrete change, not the numerical error this compares.
    routes = Capture("*.topk_ids")
    _run(spec, tensors, "reference", ids, routes)
    fast = _run(spec, tensors, "fast", ids, Capture("logits", routes=dict(routes)))
    result = assert_close(fast, expected, "bf16_model", "fast vs transformers")
    print(f"fast vs transformers: {result.describe()}")


def test_spec_features_of_variants(kimi_linear):
    """The variants cover what they claim: plain gate, low-rank output gate, q LoRA on/off, dense or not."""
    _, spec, _ = kimi_linear
    assert spec.kda.gate.kind == "plain" and spec.kda.output_gate.kind == "low_rank"
    assert spec.residual.kind == "plain" and spec.activation.kind == "silu"
    assert {layer.attention for layer in spec.layers} == {"kda", "mla"}
