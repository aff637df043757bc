"""What every stand-in shares, whatever its scale: the widths of the scaled-down ones (`Scale`), its name, the vision
tower's widths and where the special token ids go in its small vocabulary. dayone.synth.scale (tiny, small) and
dayone.synth.faithful (every per-head width kept) both build on it.
"""

from __future__ import annotations

from dataclasses import dataclass

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


def stand_in_name(name: str, suffix: str) -> str:
    """`<name>-<suffix>` within the 64 characters a spec name may have: the name is cut, not the suffix, so a stand-in
    of the longest allowed name is still a valid spec (and still says what it stands in for)."""
    return f"{name[: 63 - len(suffix)].rstrip('.-')}-{suffix}"


def scaled_vision(s: Scale = SCALES["tiny"]) -> dict:
    """The vision tower's widths at scale `s` (nothing runs the tower: its tensors are passed through)."""
    width, heads, pos = s.vision_hidden, s.vision_heads, s.vision_pos_emb
    return {
        "hidden_size": width, "intermediate_size": s.vision_intermediate, "qkv_hidden_size": width,
        "num_heads": heads, "pos_emb_height": pos, "pos_emb_width": pos, "mm_hidden_size": width,
    }  # fmt: skip


def token_ids_at_end(spec: ModelSpec, vocab: int) -> dict:
    """Special ids moved into the small vocabulary: the last ids, in the release's order (bos < eos < pad)."""
    ids = spec.token_ids.model_dump(exclude_none=True)
    ordered = sorted(ids, key=lambda k: ids[k])
    return {k: vocab - len(ordered) + i for i, k in enumerate(ordered)}
