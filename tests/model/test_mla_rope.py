"""Rotary MLA (mla.nope false) against transformers' DeepSeek-V3 attention, an independent implementation of the same
layer: DeepseekV3Attention with random weights copied into the spec's MLA in both tiers, YaRN scaling on and off,
interleaved and half-split pairs, full sequences and prefill + decode through the paged cache at offset positions."""

from __future__ import annotations

import math

import pytest
import torch
from dayone.adapters.model.batch import Batch
from dayone.adapters.model.config import get_tier
from dayone.adapters.model.mla import MLA
from dayone.adapters.model.rope import Rotary
from dayone.core.numerics import assert_close
from dayone.spec.schema import Rope
from model_fixtures import tiny_k3_spec, with_updates

HIDDEN, HEADS, Q_LORA, KV_LORA, NOPE, ROPE, V = 64, 2, 32, 32, 16, 8, 16
EPS = 1e-6  # DeepseekV3Attention builds its q_a / kv_a RMSNorms with transformers' default eps


def yarn(theta: float, factor: float, original: int, beta_fast: float, beta_slow: float, mscale: float,
         mscale_all_dim: float) -> tuple[dict, dict]:  # fmt: skip
    """The same YaRN settings as transformers' rope_parameters and as dayone's mla.rope."""
    scaling = {"factor": factor, "original_max_position_embeddings": original, "beta_fast": beta_fast,
               "beta_slow": beta_slow, "mscale": mscale, "mscale_all_dim": mscale_all_dim}  # fmt: skip
    hf = {"rope_type": "yarn", "rope_theta": theta, **scaling}
    return hf, {"theta": theta, "scaling": {"kind": "yarn", **scaling}}


# name -> (transformers rope_parameters, dayone mla.rope, q LoRA rank, interleave)
VARIANTS = {
    # DeepSeek-V3's own settings (mscale = mscale_all_dim: cos/sin unscaled, softmax scale times m^2); at rope dim
    # 8 the ramp's bounds (1.31, 2.81) round outwards to (1, 3)
    "yarn-deepseek-v3": (*yarn(10000.0, 40.0, 4096, 32.0, 1.0, 1.0, 1.0), Q_LORA, True),
    # mscale != mscale_all_dim: cos and sin scaled as well; Kimi K2's beta_fast = beta_slow = 1
    "yarn-amplitude": (*yarn(50000.0, 32.0, 32, 1.0, 1.0, 1.0, 0.7), None, True),
    "plain-halves": ({"rope_type": "default", "rope_theta": 10000.0}, {"theta": 10000.0, "interleave": False}, Q_LORA,
                     False),
}  # fmt: skip


def hf_attention(variant: str, seed: int = 0):
    from transformers import DeepseekV3Config
    from transformers.models.deepseek_v3.modeling_deepseek_v3 import DeepseekV3Attention, DeepseekV3RotaryEmbedding

    rope_parameters, _, q_lora, interleave = VARIANTS[variant]
    config = DeepseekV3Config(
        vocab_size=96, hidden_size=HIDDEN, num_attention_heads=HEADS, num_key_value_heads=HEADS, q_lora_rank=q_lora,
        kv_lora_rank=KV_LORA, qk_nope_head_dim=NOPE, qk_rope_head_dim=ROPE, v_head_dim=V,
        max_position_embeddings=4096, rope_parameters=dict(rope_parameters), rope_interleave=interleave,
        attention_bias=False,
    )  # fmt: skip
    config._attn_implementation = "eager"
    torch.manual_seed(seed)
    attention = DeepseekV3Attention(config, layer_idx=0).float().eval()
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in attention.named_parameters():
            if "layernorm" in name:
                p.copy_(1 + 0.1 * torch.randn(p.shape, generator=gen))
            else:
                p.copy_(torch.randn(p.shape, generator=gen) / math.sqrt(p.shape[-1]))
    return attention, DeepseekV3RotaryEmbedding(config)


def our_mla(variant: str, attention, tier: str) -> MLA:
    _, rope, q_lora, _ = VARIANTS[variant]
    mla = {"num_heads": HEADS, "q_lora_rank": q_lora, "kv_lora_rank": KV_LORA, "qk_nope_head_dim": NOPE,
           "qk_rope_head_dim": ROPE, "v_head_dim": V, "nope": False, "rope": rope, "output_gate": False,
           "norm_eps": EPS}  # fmt: skip
    spec = with_updates(tiny_k3_spec(5), {"hidden_size": HIDDEN, "mla": mla})
    module = MLA(spec, get_tier(tier))
    state = attention.state_dict()
    with torch.no_grad():
        for name, buf in module.named_buffers():
            if buf is not None and f"{name}.weight" in state:
                buf.copy_(state[f"{name}.weight"])
    module.refresh_derived()
    return module


def hf_forward(attention, rotary, x: torch.Tensor) -> torch.Tensor:
    """x [S, D] one sequence from position 0 -> [S, D], causal."""
    S = x.shape[0]
    positions = torch.arange(S)[None]
    mask = torch.full((S, S), float("-inf")).triu(1)[None, None]
    with torch.no_grad():
        out, _ = attention(x[None], rotary(x[None], positions), mask)
    return out[0]


def sequences(lengths, seed=1):
    gen = torch.Generator().manual_seed(seed)
    return [torch.randn(n, HIDDEN, generator=gen) for n in lengths]


@pytest.mark.parametrize("variant", list(VARIANTS))
@pytest.mark.parametrize("tier", ["reference", "fast"])
def test_full_sequence_matches_transformers(variant, tier):
    """Packed requests of 23, 6 and 1 tokens (each from position 0) against DeepseekV3Attention one at a time."""
    attention, rotary = hf_attention(variant)
    ours = our_mla(variant, attention, tier)
    xs = sequences([23, 6, 1])
    dtype = get_tier(tier).dtype
    with torch.inference_mode():
        packed = ours(torch.cat(xs).to(dtype), Batch(tuple(x.shape[0] for x in xs), (0, 0, 0)), None)
    for b, (x, got) in enumerate(zip(xs, packed.split([x.shape[0] for x in xs]))):
        tolerance = "fp32_oracle" if tier == "reference" else "bf16_model"
        assert_close(got.float(), hf_forward(attention, rotary, x), tolerance, f"{variant} {tier}: request {b}")


@pytest.mark.parametrize("variant", ["yarn-deepseek-v3", "plain-halves"])
@pytest.mark.parametrize("tier", ["reference", "fast"])
def test_prefill_then_decode_matches_transformers(variant, tier):
    """Prefill of 13 and 4 tokens then 6 decode steps through the paged cache (4-token pages): every step's position
    is its request's own, the fast tier's through the mla_decode kernel path."""
    attention, rotary = hf_attention(variant)
    ours = our_mla(variant, attention, tier)
    lengths, steps = [13, 4], 6
    xs = sequences([n + steps for n in lengths], seed=2)
    dtype = get_tier(tier).dtype
    state = ours.new_state(len(lengths), page_size=4)
    with torch.inference_mode():
        first = ours(torch.cat([x[:n] for x, n in zip(xs, lengths)]).to(dtype), Batch(tuple(lengths), (0, 0)), state)
        rows = list(first.split(lengths))
        for t in range(steps):
            step = torch.stack([x[n + t] for x, n in zip(xs, lengths)]).to(dtype)
            out = ours(step, Batch((1, 1), tuple(n + t for n in lengths)), state)
            rows = [torch.cat([r, out[b : b + 1]]) for b, r in enumerate(rows)]
    tolerance = "fp32_oracle" if tier == "reference" else "bf16_model"
    for b, x in enumerate(xs):
        assert_close(rows[b].float(), hf_forward(attention, rotary, x), tolerance, f"{variant} {tier}: request {b}")


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_rotation_matches_transformers_at_long_positions(variant):
    """The rotation itself, positions up to 100k (past YaRN's original context): transformers' cos/sin and its
    interleaved or half-split rotation. Its interleaved form returns [even dims | odd dims]: compared as such."""
    from transformers.models.deepseek_v3.modeling_deepseek_v3 import (
        apply_rotary_pos_emb,
        apply_rotary_pos_emb_interleave,
    )

    _, rotary = hf_attention(variant)
    _, rope, _, interleave = VARIANTS[variant]
    positions = torch.tensor([0, 1, 7, 63, 64, 1000, 4095, 40_000, 100_000])
    x = torch.randn(len(positions), HEADS, ROPE, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    ours = Rotary(Rope.model_validate(rope), ROPE).rotate(x.float(), positions)
    cos, sin = rotary(x.float(), positions[None])
    apply = apply_rotary_pos_emb_interleave if interleave else apply_rotary_pos_emb
    theirs, _ = apply(x.float()[None].transpose(1, 2), x.float()[None].transpose(1, 2), cos, sin)
    theirs = theirs.transpose(1, 2)[0]
    if interleave:
        ours = torch.cat([ours[..., 0::2], ours[..., 1::2]], dim=-1)
    # angles up to 1e5 rad in fp32 on both sides: the same fp32 products, cos/sin of them within a few ulp of 1e5
    assert_close(ours, theirs, "fp32_kernel", f"{variant}: rotated dims")
