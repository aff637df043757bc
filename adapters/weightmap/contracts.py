"""What the frameworks expect of a parameter, stated once, from what a tensor's dims mean.

The layouts build tables from these facts and `check.py` verifies any table (generated, or edited by hand) against
them, so a table that drifted (a part in the wrong place, a split on the wrong dim) is caught by name.
"""

from __future__ import annotations

# How a checkpoint tensor of each role splits over tensor-parallel ranks. A linear whose output dim (0) is heads,
# intermediate or vocabulary is column-parallel; one whose input dim (1) is heads or intermediate (an output or down
# projection) is row-parallel; low-rank factors, norms, router and the latent projections are replicated (the latent
# MoE needs complete sums before its norm). Per-head vectors (A_log, dt_bias, b_proj rows) follow their heads.
SPLIT: dict[str, str] = {
    "embed": "column",
    "lm_head": "column",
    "final_norm": "replicated",
    "output_res.norm": "replicated",
    "output_res.proj": "replicated",
    "input_norm": "replicated",
    "post_attention_norm": "replicated",
    "attn_res.norm": "replicated",
    "attn_res.proj": "replicated",
    "mlp_res.norm": "replicated",
    "mlp_res.proj": "replicated",
    "kda.q_proj": "column",
    "kda.k_proj": "column",
    "kda.v_proj": "column",
    "kda.conv.q": "column",
    "kda.conv.k": "column",
    "kda.conv.v": "column",
    "kda.f_a": "replicated",
    "kda.f_b": "column",
    "kda.b_proj": "column",
    "kda.a_log": "column",
    "kda.dt_bias": "column",
    "kda.g_a": "replicated",
    "kda.g_b": "column",
    "kda.g_proj": "column",
    "kda.o_norm": "replicated",
    "kda.o_proj": "row",
    "mla.q_a": "replicated",
    "mla.q_a_norm": "replicated",
    "mla.q_b": "column",
    "mla.q_proj": "column",
    "mla.kv_a": "replicated",
    "mla.kv_a_norm": "replicated",
    "mla.kv_b": "column",
    "mla.g_proj": "column",
    "mla.o_proj": "row",
    "mlp.gate": "column",
    "mlp.up": "column",
    "mlp.down": "row",
    "moe.router": "replicated",
    "moe.correction_bias": "replicated",
    "moe.latent_down": "replicated",
    "moe.latent_norm": "replicated",
    "moe.latent_up": "replicated",
    "moe.shared.gate": "column",
    "moe.shared.up": "column",
    "moe.shared.down": "row",
    "moe.expert.gate": "column",
    "moe.expert.up": "column",
    "moe.expert.down": "row",
    "passthrough.vision": "replicated",
}

# The order in which a fused parameter's consumer reads its parts: SiLU/SiTU-and-mul take the gate half first
# (SGLang/vLLM act_and_mul, Megatron's GLU), KDA splits [q, k, v, g], MLA's fused down projection is [q_a, kv_a].
# A fused parameter's parts must appear in this relative order, unless its parts are those of an order below.
CONSUMER_ORDER: tuple[str, ...] = ("q", "k", "v", "g", "gate", "up", "q_a", "kv_a")
# Consumers with an order of their own, known by the parts they fuse: vLLM's KDA layer (KimiGatedDeltaNetAttention)
# splits its in_proj_qkvgfab as [q, k, v, g, f_a, b] with the full-rank output gate and [q, k, v, b, f_a] without.
FUSED_ORDERS: tuple[tuple[str, ...], ...] = (("q", "k", "v", "g", "f_a", "b"), ("q", "k", "v", "b", "f_a"))


def base_role(role: str) -> str:
    """The role without an MXFP4 suffix: moe.expert.gate.packed -> moe.expert.gate."""
    return role.removesuffix(".packed").removesuffix(".scale")


def split_of(role: str) -> str:
    return SPLIT[base_role(role)]


def reading_key(role: str) -> str:
    """The name a consumer knows a fused part by: kda.q_proj -> q, kda.conv.k -> k, mlp.up -> up, mla.kv_a -> kv_a."""
    leaf = base_role(role).split(".")[-1]
    return {"q_proj": "q", "k_proj": "k", "v_proj": "v", "g_proj": "g", "b_proj": "b"}.get(leaf, leaf)


def consumer_order(keys: list[str]) -> tuple[str, ...] | None:
    """The order in which the consumer of a fused parameter with these parts (reading keys) reads them; None when
    no consumer reads these parts fused."""
    for order in FUSED_ORDERS:
        if sorted(keys) == sorted(order):
            return order
    if not set(keys) <= set(CONSUMER_ORDER):
        return None
    return tuple(sorted(keys, key=CONSUMER_ORDER.index))
