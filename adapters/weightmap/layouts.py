"""Where each checkpoint role goes in a framework: the parameter names, fusions and expert layout of a target.

Four layouts: the canonical one is dayone's own model (`dayone.adapters.model`, reference and fast tiers: what
`validate` judges), three cover the four targets:
    canonical  the model's buffers: one per checkpoint tensor (no fusion), experts stacked per projection and kept
               as the checkpoint stores them (MXFP4 pairs packed), A_log without its padding.
    inference  SGLang: checkpoint names kept except fused merged linears (q/k/v/g, the three convs, q_a with kv_a,
               gate with up) and FusedMoE expert stacks (w13 = w1 gate + w3 up, w2 = down).
    vllm       vLLM: the inference layout, with KDA layers on vLLM's own KimiGatedDeltaNetAttention: one merged
               in_proj_qkvgfab (q, k, v, g, f_a, b; f_a held whole by every rank, rows aligned to 16 with the
               full-rank output gate) and one packed conv1d (the three short convs).
    megatron   Miles and Megatron-Bridge: the names of the Megatron model dayone builds (`dayone.adapters.megatron`:
               linear_fc1 = gate + up, in_proj = q/k/v/g, linear_q_down_proj, fc1_latent_proj, ...), one parameter
               per local expert (`linear_fc1.weight{e}`), experts not split by tensor parallelism (expert tensor
               parallel size 1: experts are spread by expert parallelism).
A layout only names and fuses (and aligns, where the framework pads a fused parameter); splits come from
`contracts.SPLIT` (what the dims mean: a replicated member of a column-parallel fusion is held whole by every rank),
part order from the member lists below, shapes from the spec's manifest.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from dayone.core.vocabulary import MXFP4_PARTS
from dayone.spec.schema import ModelSpec

# A fused parameter: (new leaf module name, member leaf names in the order the consumer reads them).
INFERENCE_FUSED = {
    "kda": (("fused_qkvg_proj", ("q_proj", "k_proj", "v_proj", "g_proj")),),
    "kda_low_rank": (("qkv_proj", ("q_proj", "k_proj", "v_proj")),),
    "conv": (("qkv_conv1d", ("q_conv1d", "k_conv1d", "v_conv1d")),),
    "mla": (("fused_qkv_a_proj_with_mqa", ("q_a_proj", "kv_a_proj_with_mqa")),),
    "mlp": (("gate_up_proj", ("gate_proj", "up_proj")),),
}
# FusedMoE (SGLang, vLLM): its weight_loader's shard id for each expert projection
FUSED_MOE_SHARD = {"gate": "w1", "up": "w3", "down": "w2"}
# FusedMoE: checkpoint expert weight -> (stacked parameter, loader shard id, part): w13 = [gate; up], w2 = down
INFERENCE_EXPERTS = {
    proj: (stem, FUSED_MOE_SHARD[proj], part)
    for proj, stem, part in (("gate", "w13", 0), ("up", "w13", 1), ("down", "w2", None))
}

# vLLM's KDA layer: its merged input projection's members (checkpoint leaf names) in the order its forward splits
# them, by output gate kind, and the packed short convs.
VLLM_KDA_IN_PROJ = {
    "full_rank": ("q_proj", "k_proj", "v_proj", "g_proj", "f_a_proj", "b_proj"),
    "low_rank": ("q_proj", "k_proj", "v_proj", "b_proj", "f_a_proj"),
}
VLLM_KDA_CONV = ("q_conv1d", "k_conv1d", "v_conv1d")
# vLLM's MoE runner (what FusedMoEFactory returns) keeps the expert parameters in this submodule.
VLLM_ROUTED_EXPERTS = "routed_experts"
# With the full-rank output gate vLLM pads each rank's in_proj_qkvgfab rows to a multiple of 16 (aligned bf16 GEMM).
VLLM_KDA_IN_PROJ_ALIGN = {"full_rank": 16, "low_rank": 1}

MEGATRON_GLOBAL = {
    "embed": "embedding.word_embeddings.weight",
    "final_norm": "decoder.final_layernorm.weight",
    # the output mix belongs to the last layer: megatron-core's TransformerBlock has only its final norm
    "output_res.norm": "decoder.layers.{last}.final_attn_res.norm.weight",
    "output_res.proj": "decoder.layers.{last}.final_attn_res.proj.weight",
    "lm_head": "output_layer.weight",
}
# role -> (parameter under decoder.layers.{i}., fused part index or None)
MEGATRON_LAYER = {
    "input_norm": ("input_layernorm.weight", None),
    "post_attention_norm": ("pre_mlp_layernorm.weight", None),
    "attn_res.norm": ("attn_res.norm.weight", None),
    "attn_res.proj": ("attn_res.proj.weight", None),
    "mlp_res.norm": ("mlp_res.norm.weight", None),
    "mlp_res.proj": ("mlp_res.proj.weight", None),
    "kda.q_proj": ("self_attention.in_proj.weight", 0),
    "kda.k_proj": ("self_attention.in_proj.weight", 1),
    "kda.v_proj": ("self_attention.in_proj.weight", 2),
    "kda.g_proj": ("self_attention.in_proj.weight", 3),
    "kda.conv.q": ("self_attention.conv1d.weight", 0),
    "kda.conv.k": ("self_attention.conv1d.weight", 1),
    "kda.conv.v": ("self_attention.conv1d.weight", 2),
    "kda.f_a": ("self_attention.f_a_proj.weight", None),
    "kda.f_b": ("self_attention.f_b_proj.weight", None),
    "kda.b_proj": ("self_attention.beta_proj.weight", None),
    "kda.a_log": ("self_attention.A_log", None),
    "kda.dt_bias": ("self_attention.dt_bias", None),
    "kda.g_a": ("self_attention.g_a_proj.weight", None),
    "kda.g_b": ("self_attention.g_b_proj.weight", None),
    "kda.o_norm": ("self_attention.out_norm.weight", None),
    "kda.o_proj": ("self_attention.out_proj.weight", None),
    "mla.q_a": ("self_attention.linear_q_down_proj.weight", None),
    "mla.q_a_norm": ("self_attention.q_layernorm.weight", None),
    "mla.q_b": ("self_attention.linear_q_up_proj.weight", None),
    "mla.q_proj": ("self_attention.linear_q_proj.weight", None),
    "mla.kv_a": ("self_attention.linear_kv_down_proj.weight", None),
    "mla.kv_a_norm": ("self_attention.kv_layernorm.weight", None),
    "mla.kv_b": ("self_attention.linear_kv_up_proj.weight", None),
    "mla.g_proj": ("self_attention.linear_output_gate.weight", None),
    "mla.o_proj": ("self_attention.linear_proj.weight", None),
    "mlp.gate": ("mlp.linear_fc1.weight", 0),
    "mlp.up": ("mlp.linear_fc1.weight", 1),
    "mlp.down": ("mlp.linear_fc2.weight", None),
    "moe.router": ("mlp.router.weight", None),
    "moe.correction_bias": ("mlp.router.expert_bias", None),
    # megatron-core's MoELayer names (fc1/fc2_latent_proj); the latent norm under the name Miles' K3 converter uses
    "moe.latent_down": ("mlp.fc1_latent_proj.weight", None),
    "moe.latent_norm": ("mlp.routed_expert_norm.weight", None),
    "moe.latent_up": ("mlp.fc2_latent_proj.weight", None),
    "moe.shared.gate": ("mlp.shared_experts.linear_fc1.weight", 0),
    "moe.shared.up": ("mlp.shared_experts.linear_fc1.weight", 1),
    "moe.shared.down": ("mlp.shared_experts.linear_fc2.weight", None),
}
# expert projection -> (parameter stem under decoder.layers.{i}.mlp.experts., part)
MEGATRON_EXPERTS = {"gate": ("linear_fc1", 0), "up": ("linear_fc1", 1), "down": ("linear_fc2", None)}
MXFP4_SUFFIX = MXFP4_PARTS
# SGLang and vLLM: their MXFP4 MoE method registers the packed experts as `w13_weight` / `w2_weight` (their own
# K3 code renames `weight_packed` -> `weight`), the scales as `w13_weight_scale` / `w2_weight_scale`.
INFERENCE_MXFP4_SUFFIX = {"packed": "weight", "scale": MXFP4_PARTS["scale"]}


# The canonical layout: role -> buffer of the model (`SpecModel.get_buffer`), globals by full path, layer tensors
# under layers.{i}.; routed experts stacked [E, ...] as ffn.experts.<proj> (<proj>_packed / <proj>_scale for MXFP4).
CANONICAL_GLOBAL = {
    "embed": "embed_tokens.weight",
    "final_norm": "head.norm",
    "lm_head": "head.lm_head",
    "output_res.norm": "head.output_res.norm",
    "output_res.proj": "head.output_res.proj",
}
CANONICAL_LAYER = {
    "input_norm": "input_layernorm",
    "post_attention_norm": "post_attention_layernorm",
    "attn_res.norm": "attn_res.norm",
    "attn_res.proj": "attn_res.proj",
    "mlp_res.norm": "mlp_res.norm",
    "mlp_res.proj": "mlp_res.proj",
    "kda.q_proj": "self_attn.q_proj",
    "kda.k_proj": "self_attn.k_proj",
    "kda.v_proj": "self_attn.v_proj",
    "kda.conv.q": "self_attn.q_conv",
    "kda.conv.k": "self_attn.k_conv",
    "kda.conv.v": "self_attn.v_conv",
    "kda.f_a": "self_attn.f_a_proj",
    "kda.f_b": "self_attn.f_b_proj",
    "kda.b_proj": "self_attn.b_proj",
    "kda.a_log": "self_attn.A_log",
    "kda.dt_bias": "self_attn.dt_bias",
    "kda.g_a": "self_attn.g_a_proj",
    "kda.g_b": "self_attn.g_b_proj",
    "kda.g_proj": "self_attn.g_proj",
    "kda.o_norm": "self_attn.o_norm",
    "kda.o_proj": "self_attn.o_proj",
    "mla.q_a": "self_attn.q_a_proj",
    "mla.q_a_norm": "self_attn.q_a_layernorm",
    "mla.q_b": "self_attn.q_b_proj",
    "mla.q_proj": "self_attn.q_proj",
    "mla.kv_a": "self_attn.kv_a_proj_with_mqa",
    "mla.kv_a_norm": "self_attn.kv_a_layernorm",
    "mla.kv_b": "self_attn.kv_b_proj",
    "mla.g_proj": "self_attn.g_proj",
    "mla.o_proj": "self_attn.o_proj",
    "mlp.gate": "ffn.gate_proj",
    "mlp.up": "ffn.up_proj",
    "mlp.down": "ffn.down_proj",
    "moe.router": "ffn.router.weight",
    "moe.correction_bias": "ffn.router.e_score_correction_bias",
    "moe.latent_down": "ffn.routed_expert_down_proj",
    "moe.latent_norm": "ffn.routed_expert_norm",
    "moe.latent_up": "ffn.routed_expert_up_proj",
    "moe.shared.gate": "ffn.shared.gate_proj",
    "moe.shared.up": "ffn.shared.up_proj",
    "moe.shared.down": "ffn.shared.down_proj",
}
CANONICAL_EXPERTS = "ffn.experts."  # + gate | up | down (float) or gate_packed | gate_scale ... (MXFP4)


@dataclass(frozen=True)
class Place:
    """Where one checkpoint tensor goes: parameter name (pattern), fused part, loader shard id, expert layout."""

    target: str
    part: int | None = None
    members: int | None = None  # number of fused parts (None: not fused)
    shard: int | str | None = None
    experts: str = ""
    tp: str | None = None  # overrides contracts.SPLIT (Megatron experts: replicated over tensor parallelism)
    align: int = 1  # a rank's rows padded to a multiple of this (walk.Param.align)


def canonical_place(spec: ModelSpec, source: str, role: str, mxfp4: str) -> Place:
    """dayone's model: one buffer per checkpoint tensor, experts stacked, nothing fused."""
    if role.startswith("passthrough"):
        return Place(source)  # not part of the text model: the loader skips it
    if role in CANONICAL_GLOBAL:
        return Place(CANONICAL_GLOBAL[role])
    if role.startswith("moe.expert."):
        proj, kind = role.split(".")[2], (role.split(".")[3] if role.count(".") == 3 else None)
        leaf = proj if kind is None or mxfp4 == "dequantize" else f"{proj}_{kind}"
        return Place(f"layers.{{i}}.{CANONICAL_EXPERTS}{leaf}", experts="stacked")
    return Place(f"layers.{{i}}.{CANONICAL_LAYER[role]}")


def inference_place(spec: ModelSpec, source: str, role: str, mxfp4: str) -> Place:
    """SGLang / vLLM: source is a checkpoint name pattern ({i}, {e})."""
    if role.startswith("moe.expert."):
        proj, kind = role.split(".")[2], (role.split(".")[3] if role.count(".") == 3 else None)
        stem, shard, part = INFERENCE_EXPERTS[proj]
        module = source.split("experts.{e}.")[0] + "experts."
        suffix = "weight" if kind is None or mxfp4 == "dequantize" else INFERENCE_MXFP4_SUFFIX[kind]
        members = 2 if stem == "w13" else None
        return Place(f"{module}{stem}_{suffix}", part, members, shard, "stacked")
    module, _, leaf_and_attr = source.rpartition(".")
    owner, _, leaf = module.rpartition(".")
    for group in _inference_groups(spec, role):
        for fused, members in INFERENCE_FUSED[group]:
            if leaf in members:
                return Place(f"{owner}.{fused}.{leaf_and_attr}", members.index(leaf), len(members), members.index(leaf))
    return Place(source)


def vllm_place(spec: ModelSpec, source: str, role: str, mxfp4: str) -> Place:
    """vLLM: the inference layout, KDA projections and convs fused as vLLM's KimiGatedDeltaNetAttention has them."""
    if role.startswith("kda."):
        module, _, attr = source.rpartition(".")
        owner, _, leaf = module.rpartition(".")
        gate = spec.kda.output_gate.kind
        fused = (
            ("in_proj_qkvgfab", VLLM_KDA_IN_PROJ[gate], VLLM_KDA_IN_PROJ_ALIGN[gate]),
            ("conv1d", VLLM_KDA_CONV, 1),
        )
        for name, members, align in fused:
            if leaf in members:
                part = members.index(leaf)
                return Place(f"{owner}.{name}.{attr}", part, len(members), part, align=align)
    place = inference_place(spec, source, role, mxfp4)
    if role.startswith("moe.expert."):
        # vLLM's FusedMoEFactory returns a MoERunner that holds the expert stacks in its `routed_experts` module.
        module, _, leaf = place.target.rpartition(".experts.")
        return replace(place, target=f"{module}.experts.{VLLM_ROUTED_EXPERTS}.{leaf}")
    return place


def _inference_groups(spec: ModelSpec, role: str) -> tuple[str, ...]:
    if role.startswith("kda.conv"):
        return ("conv",)
    if role in ("kda.q_proj", "kda.k_proj", "kda.v_proj", "kda.g_proj"):
        return ("kda",) if spec.kda.output_gate.kind == "full_rank" else ("kda_low_rank",)
    if role in ("mla.q_a", "mla.kv_a") and spec.mla.q_lora_rank is not None:
        return ("mla",)
    if role in ("mlp.gate", "mlp.up", "moe.shared.gate", "moe.shared.up"):
        return ("mlp",)
    return ()


def megatron_place(spec: ModelSpec, source: str, role: str, mxfp4: str) -> Place:
    if role.startswith("passthrough"):
        return Place(source)
    if role in MEGATRON_GLOBAL:
        return Place(MEGATRON_GLOBAL[role].format(last=spec.num_layers - 1))
    if role.startswith("moe.expert."):
        proj, kind = role.split(".")[2], (role.split(".")[3] if role.count(".") == 3 else None)
        stem, part = MEGATRON_EXPERTS[proj]
        suffix = "weight" if kind is None or mxfp4 == "dequantize" else MXFP4_SUFFIX[kind]
        members = 2 if part is not None else None
        return Place(
            f"decoder.layers.{{i}}.mlp.experts.{stem}.{suffix}{{e}}", part, members, None, "named", "replicated"
        )
    target, part = MEGATRON_LAYER[role]
    members = {"self_attention.in_proj.weight": _kda_in_proj_parts(spec), "self_attention.conv1d.weight": 3}
    count = members.get(target, 2) if part is not None else None
    return Place(f"decoder.layers.{{i}}.{target}", part, count, part)


def _kda_in_proj_parts(spec: ModelSpec) -> int:
    return 4 if spec.kda is not None and spec.kda.output_gate.kind == "full_rank" else 3


LAYOUTS = {
    "canonical": canonical_place,
    "inference": inference_place,
    "vllm": vllm_place,
    "megatron": megatron_place,
}
# Layouts of inference engines: they keep tensors derived from weights (build.WeightMap.DERIVED).
ENGINE_LAYOUTS = ("inference", "vllm")
# The layout each target's generated code uses.
TARGET_LAYOUT = {"sglang": "inference", "vllm": "vllm", "miles": "megatron", "megatron-bridge": "megatron"}
