"""A tiny K3-shaped model (every K3 feature, 93 or 25 layers): tiers against each other, cache against full forward,
capture points, streaming."""

from __future__ import annotations

import torch
from dayone.adapters.model import Capture, SpecModel, WeightLoader
from dayone.adapters.model.attn_residual import Stream
from dayone.core import vocabulary
from dayone.core.numerics import assert_close


def _load(spec, tensors, tier):
    model = SpecModel(spec, tier)
    WeightLoader(spec, tensors.__getitem__).load(model)
    return model


def _check_cache_matches_full_forward(model, prompts, tolerance):
    ids, lengths = prompts
    extra = torch.randint(3, 96, (len(lengths), 3), generator=torch.Generator().manual_seed(3))
    expected = model([torch.cat([ids[b, :n], extra[b]]) for b, n in enumerate(lengths)])
    cache = model.new_cache(len(lengths))
    prefill = model.prefill(ids, lengths, cache)
    for b, n in enumerate(lengths):
        assert_close(prefill[b, :n], expected[b][:n], tolerance, f"prefill of request {b}")
        assert not prefill[b, n:].any()
    for t in range(extra.shape[1]):
        step = model.decode(extra[:, t], cache)
        for b, n in enumerate(lengths):
            assert_close(step[b], expected[b][n + t], tolerance, f"decode step {t} of request {b}")
    assert cache.lengths == [n + extra.shape[1] for n in lengths]


def test_spec_has_every_k3_feature(k3_93):
    spec, tensors = k3_93
    assert spec.num_layers == 93 and sum(layer.snapshot for layer in spec.layers) == 8
    assert spec.kda.gate.kind == "safe" and spec.kda.output_gate.kind == "full_rank" and spec.kda.a_log_padding > 0
    assert spec.mla.q_lora_rank and spec.mla.output_gate and spec.activation.kind == "situ"
    assert spec.moe.latent_size and spec.moe.latent_norm and spec.quantization is not None
    assert any(name.endswith("weight_packed") for name in tensors)


def test_prefill_then_decode_equals_full_forward_reference(k3_93, prompts):
    spec, tensors = k3_93
    _check_cache_matches_full_forward(_load(spec, tensors, "reference"), prompts, "fp32")


def test_prefill_then_decode_fast_tier(k3_5, prompts):
    """Chunked prefill + recurrent decode kernels against the chunked full forward, both bf16."""
    spec, tensors = k3_5
    _check_cache_matches_full_forward(_load(spec, tensors, "fast"), prompts, "bf16_model")


def test_fast_tier_layer_by_layer(k3_25, prompts):
    """Every layer of the fast tier, fed the reference tier's input stream (in bf16) and its routing, lands within
    the bf16 tolerance of the reference layer: errors of one layer are not hidden by (or blamed on) earlier ones."""
    spec, tensors = k3_25
    ref, fast = _load(spec, tensors, "reference"), _load(spec, tensors, "fast")
    ids, batch = ref.pack(*prompts)
    stream = ref.embed(ids)
    for i, (layer_ref, layer_fast) in enumerate(zip(ref.layers, fast.layers)):
        routes = Capture("*.topk_ids")
        with torch.inference_mode():
            out_ref = layer_ref(stream, batch, None, routes)
            bf16 = Stream(stream.prefix.bfloat16(), [b.bfloat16() for b in stream.bank])
            out_fast = layer_fast(bf16, batch, None, Capture("-", routes=dict(routes)))
        assert len(out_fast.bank) == len(out_ref.bank) == 1 + i // 12
        assert_close(out_fast.prefix, out_ref.prefix, "bf16_model", f"layer {i}")
        stream = out_ref
    with torch.inference_mode():
        logits_fast = fast.head(Stream(stream.prefix.bfloat16(), [b.bfloat16() for b in stream.bank]),
                                fast.embed_tokens.weight)  # fmt: skip
        logits_ref = ref.head(stream, ref.embed_tokens.weight)
    assert_close(logits_fast, logits_ref, "bf16_model", "head")


def test_fast_tier_end_to_end(k3_25, prompts):
    """25 layers (snapshots at 0, 12, 24) with the reference's routing: bf16 near-ties in a random router flip
    ~10% of the top-k choices, a discrete change that the tolerance is not about."""
    spec, tensors = k3_25
    ref, fast = _load(spec, tensors, "reference"), _load(spec, tensors, "fast")
    routes = Capture("*.topk_ids")
    expected = ref(*prompts, capture=routes)
    assert_close(fast(*prompts, capture=Capture("-", routes=dict(routes))), expected, "bf16_model", "logits")


def test_capture_points_and_batching(k3_5, prompts):
    spec, tensors = k3_5
    model = _load(spec, tensors, "reference")
    cap = Capture()
    logits = model(*prompts, capture=cap)
    N = sum(prompts[1])
    expected = {"embed", "output_res", "final_norm", "logits", "layers.0.attn_res", "layers.0.attn_out",
                "layers.0.mlp_res", "layers.0.mlp_out", "layers.0.out", "layers.3.attn_out", "layers.1.router_logits",
                "layers.1.topk_ids", "layers.1.topk_weights", "layers.1.latent_down", "layers.1.latent_combined",
                "layers.1.latent_normed", "layers.1.latent_up"}  # fmt: skip
    assert expected <= set(cap)
    assert "layers.0.router_logits" not in cap  # layer 0 is dense
    assert cap["layers.1.router_logits"].shape == (N, spec.moe.num_experts)
    assert cap["layers.1.topk_ids"].shape == (N, spec.moe.experts_per_token)
    assert torch.equal(cap["layers.1.own_topk_ids"], cap["layers.1.topk_ids"])  # no replay: the router's own
    assert cap["layers.1.latent_down"].shape == (N, spec.moe.latent_size)
    # the model records the vocabulary's points and no others, every layer point somewhere in a K3-shaped stack
    named = {vocabulary.EMBED, *vocabulary.HEAD_POINTS}
    named |= {vocabulary.layer_point(i, p) for i in range(spec.num_layers) for p in vocabulary.LAYER_POINTS}
    assert set(cap) <= named
    assert {name.rsplit(".", 1)[1] for name in cap if name.startswith("layers.")} == set(vocabulary.LAYER_POINTS)
    only = Capture("layers.*.attn_out")
    model(*prompts, capture=only)
    assert set(only) == {f"layers.{i}.attn_out" for i in range(spec.num_layers)}
    ids, lengths = prompts
    for b, n in enumerate(lengths):  # a request alone gives what it gives in the batch
        assert_close(model(ids[b : b + 1, :n])[0], logits[b, :n], "fp32", f"request {b} alone")


def test_streaming_forward_equals_resident(k3_93, prompts):
    spec, tensors = k3_93
    expected = _load(spec, tensors, "reference")(*prompts)
    streamed = SpecModel(spec, "reference", device="meta")
    logits = streamed.forward_streaming(prompts[0], WeightLoader(spec, tensors.__getitem__), prompts[1])
    assert_close(logits, expected, "exact", "streamed logits")
    assert all(b.is_meta for b in streamed.layers[50].buffers())


def test_replayed_routes_keep_the_routers_own_choice(k3_5, prompts):
    """Under replay the experts used are the replayed ones, and own_topk_ids still records the router's choice."""
    spec, tensors = k3_5
    model = _load(spec, tensors, "reference")
    first = Capture("layers.1.*topk_ids")
    model(*prompts, capture=first)
    other = (first["layers.1.topk_ids"] + 1) % spec.moe.num_experts
    replayed = Capture("layers.1.*topk_ids", routes={"layers.1.topk_ids": other})
    model(*prompts, capture=replayed)
    assert torch.equal(replayed["layers.1.topk_ids"], other.sort(dim=-1).values)
    assert torch.equal(replayed["layers.1.own_topk_ids"], first["layers.1.own_topk_ids"])
