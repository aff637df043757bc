"""A released spec with its widths scaled down and its structure kept: the shape of a synthetic checkpoint.

Every feature of the spec survives (gate kinds, output gates, q LoRA or not, latent MoE and its norm, attention
residuals, quantization, vision passthrough, the release's shard count); only widths, counts and the vocabulary
shrink. `layers` keeps the first N rows of the release's layer table (all of them by default, so K3's 93 layers with
their snapshot transitions at 12, 24, ..., 84 are there).
"""

from __future__ import annotations

from dataclasses import dataclass

from dayone.core.errors import InputError
from dayone.spec.family import conventions_for
from dayone.spec.layout import to_expression
from dayone.spec.registry import spec_to_dict
from dayone.spec.schema import ModelSpec


@dataclass(frozen=True)
class Scale:
    """The widths of a scaled-down model. Matrix widths that MXFP4 groups split are multiples of 32."""

    hidden: int
    vocab: int
    heads: int  # KDA and MLA heads
    head_dim: int  # KDA head dim (K = V), KDA gate ranks
    q_lora: int
    kv_lora: int
    qk_nope: int
    qk_rope: int
    v_head: int
    experts: int
    experts_per_token: int
    expert_intermediate: int  # per routed (and per shared) expert
    latent: int
    dense_intermediate: int
    vision_hidden: int
    vision_intermediate: int
    vision_heads: int
    vision_pos_emb: int


SCALES: dict[str, Scale] = {
    # Seconds on a laptop CPU for all 93 K3 layers: widths just large enough that every head, expert and MXFP4
    # group exists more than once.
    "tiny": Scale(hidden=64, vocab=256, heads=2, head_dim=16, q_lora=32, kv_lora=32, qk_nope=16, qk_rope=8,
                  v_head=16, experts=8, experts_per_token=2, expert_intermediate=32, latent=32,
                  dense_intermediate=128, vision_hidden=16, vision_intermediate=32, vision_heads=2,
                  vision_pos_emb=4),
    # Closer to real proportions (KDA head dim 64 fills a kernel tile); still seconds per layer on a CPU.
    "small": Scale(hidden=256, vocab=2048, heads=4, head_dim=64, q_lora=128, kv_lora=64, qk_nope=32, qk_rope=16,
                   v_head=32, experts=32, experts_per_token=4, expert_intermediate=64, latent=128,
                   dense_intermediate=768, vision_hidden=32, vision_intermediate=64, vision_heads=2,
                   vision_pos_emb=8),
}  # fmt: skip


SCALE_NAMES = (*SCALES, "faithful")


def stand_in_name(name: str, suffix: str) -> str:
    """`<name>-<suffix>` within the 64 characters a spec name may have: the name is cut, not the suffix, so a stand-in
    of the longest allowed name is still a valid spec (and still says what it stands in for)."""
    return f"{name[: 63 - len(suffix)].rstrip('.-')}-{suffix}"


def scaled_spec(spec: ModelSpec, scale: str | Scale, layers: int | None = None) -> ModelSpec:
    """A copy of `spec` at `scale` ("tiny", "small", "faithful" or a Scale), optionally cut to its first `layers`
    layers ("faithful" chooses its own layers: dayone.synth.faithful)."""
    if scale == "faithful":
        if layers is not None:
            raise InputError("--layers: the faithful scale chooses its layers (whole periods of the layout)")
        from dayone.synth.faithful import faithful_spec

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


def scaled_vision(s: Scale = SCALES["tiny"]) -> dict:
    """The vision tower's widths at scale `s` (nothing runs the tower: its tensors are passed through)."""
    width, heads, pos = s.vision_hidden, s.vision_heads, s.vision_pos_emb
    return {
        "hidden_size": width, "intermediate_size": s.vision_intermediate, "qkv_hidden_size": width,
        "num_heads": heads, "pos_emb_height": pos, "pos_emb_width": pos, "mm_hidden_size": width,
    }  # fmt: skip


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


def token_ids_at_end(spec: ModelSpec, vocab: int) -> dict:
    """Special ids moved into the small vocabulary: the last ids, in the release's order (bos < eos < pad)."""
    ids = spec.token_ids.model_dump(exclude_none=True)
    ordered = sorted(ids, key=lambda k: ids[k])
    return {k: vocab - len(ordered) + i for i, k in enumerate(ordered)}
