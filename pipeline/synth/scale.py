"""A released spec with its widths scaled down and its structure kept: the shape of a synthetic checkpoint.

Every feature of the spec survives (gate kinds, output gates, q LoRA or not, latent MoE and its norm, attention
residuals, quantization, vision passthrough, the release's shard count); only widths, counts and the vocabulary
shrink. `layers` keeps the first N rows of the release's layer table (all of them by default, so K3's 93 layers with
their snapshot transitions at 12, 24, ..., 84 are there).
"""

from __future__ import annotations

from dayone.core.errors import InputError
from dayone.spec.family import conventions_for
from dayone.spec.layout import to_expression
from dayone.spec.registry import spec_to_dict
from dayone.spec.schema import ModelSpec
from dayone.synth.faithful import faithful_spec
from dayone.synth.stand_in import SCALES, Scale, scaled_vision, stand_in_name, token_ids_at_end

SCALE_NAMES = (*SCALES, "faithful")


def scaled_spec(spec: ModelSpec, scale: str | Scale, layers: int | None = None) -> ModelSpec:
    """A copy of `spec` at `scale` ("tiny", "small", "faithful" or a Scale), optionally cut to its first `layers`
    layers ("faithful" chooses its own layers: dayone.synth.faithful)."""
    if scale == "faithful":
        if layers is not None:
            raise InputError("--layers: the faithful scale chooses its layers (whole periods of the layout)")
        return faithful_spec(spec)
    if isinstance(scale, str):
        if scale not in SCALES:
            raise InputError(f"--scale {scale!r}: choose from {', '.join(SCALE_NAMES)}")
        name, s = stand_in_name(spec.name, scale), SCALES[scale]
    else:
        name, s = stand_in_name(spec.name, "scaled"), scale
    data = spec_to_dict(spec)
    data.update(name=name, hidden_size=s.hidden, vocab_size=s.vocab)
    data["token_ids"] = token_ids_at_end(spec, s.vocab)
    if layers is not None:
        if not 1 <= layers <= spec.num_layers:
            raise InputError(f"--layers {layers}: {spec.name} has 1..{spec.num_layers} layers")
        data["num_layers"] = layers
        data["layout"] = {
            "attention": to_expression(spec.attention_kinds[:layers]),
            "ffn": to_expression(spec.ffn_kinds[:layers]),
        }
    if spec.kda is not None:
        kda = data["kda"]
        kda.update(num_heads=s.heads, head_dim=s.head_dim, a_log_shape=_a_log_shape(spec, s.heads))
        kda["gate"]["rank"] = s.head_dim
        if spec.kda.output_gate.kind == "low_rank":
            kda["output_gate"]["rank"] = s.head_dim
    if spec.mla is not None:
        data["mla"].update(num_heads=s.heads, kv_lora_rank=s.kv_lora, qk_nope_head_dim=s.qk_nope,
                           qk_rope_head_dim=s.qk_rope, v_head_dim=s.v_head)  # fmt: skip
        if spec.mla.q_lora_rank is not None:
            data["mla"]["q_lora_rank"] = s.q_lora
    if spec.dense_intermediate_size is not None:
        data["dense_intermediate_size"] = s.dense_intermediate
    if spec.moe is not None:
        moe = data["moe"]
        groups = spec.moe.router.num_groups
        experts = max(s.experts, groups * 2) // groups * groups  # whole groups, two experts at least in each
        moe.update(num_experts=experts, experts_per_token=min(s.experts_per_token, spec.moe.experts_per_token),
                   expert_intermediate_size=s.expert_intermediate,
                   shared_intermediate_size=spec.moe.num_shared_experts * s.expert_intermediate)  # fmt: skip
        if spec.moe.latent_size is not None:
            moe["latent_size"] = s.latent
    if spec.passthrough is not None and spec.passthrough.vision is not None:
        data["passthrough"]["vision"].update(scaled_vision(s))
    data["release"] = {"num_shards": spec.release.num_shards} if spec.release.num_shards else {}
    return ModelSpec.model_validate(data)


def _a_log_shape(spec: ModelSpec, heads: int) -> list[int]:
    """A_log stored the way the family's releases store it (K3: flat, zero-padded to a multiple of 128;
    Kimi Linear: [1, 1, H, 1]), so the config -> spec derivation of the synthetic checkpoint gives this spec back."""
    pad_to = conventions_for(spec.hf.model_type, inline=spec.conventions).a_log_pad_to
    assert spec.kda is not None
    if len(spec.kda.a_log_shape) == 4:
        return [1, 1, heads, 1]
    if pad_to:
        return [-(-heads // pad_to) * pad_to]
    return [heads]
