"""Megatron-Bridge: a bridge module registering the architecture with a mapping registry built from the megatron
weight table (replicated, column-parallel, row-parallel, gated and fused mappings) and an MLA model provider with
the spec's sizes. The package's `__init__` imports nothing of Megatron: `register()` imports bridge.py, whose
decorator registers the bridge (Megatron-Bridge 0.3.1 discovers bridges by import only).

    <out>/megatron_bridge/<package>/bridge.py, __init__.py
    <out>/megatron_bridge/<package>/weight_table.py, walk.py, mxfp4.py
"""

from __future__ import annotations

from dayone.adapters.targets import common
from dayone.adapters.weightmap import build_weight_map
from dayone.spec.schema import ModelSpec

TARGET = "megatron-bridge"
RELEASE = "0.3.1"


def provider(spec: ModelSpec) -> list[tuple[str, object]]:
    """MLAModelProvider fields (Megatron-Core TransformerConfig names)."""
    out: list[tuple[str, object]] = [
        ("num_layers", spec.num_layers),
        ("hidden_size", spec.hidden_size),
        ("vocab_size", spec.vocab_size),
        ("seq_length", min(spec.max_position_embeddings, 8192)),
        ("normalization", "RMSNorm"),
        ("layernorm_epsilon", spec.norm_eps),
        ("gated_linear_unit", True),
        ("add_bias_linear", False),
        ("share_embeddings_and_output_weights", spec.tie_word_embeddings),
        ("position_embedding_type", "none"),
    ]
    if spec.dense_intermediate_size:
        out.append(("ffn_hidden_size", spec.dense_intermediate_size))
    if spec.kda is not None:
        k = spec.kda
        out += [
            ("linear_attention_freq", [1 if a == "kda" else 0 for a in spec.attention_kinds]),
            ("linear_conv_kernel_dim", k.conv_kernel_size),
            ("linear_key_head_dim", k.head_dim),
            ("linear_value_head_dim", k.head_dim),
            ("linear_num_key_heads", k.num_heads),
            ("linear_num_value_heads", k.num_heads),
        ]
    if spec.mla is not None:
        m = spec.mla
        out += [
            ("multi_latent_attention", True),
            ("num_attention_heads", m.num_heads),
            ("q_lora_rank", m.q_lora_rank),
            ("kv_lora_rank", m.kv_lora_rank),
            ("qk_head_dim", m.qk_nope_head_dim),
            ("qk_pos_emb_head_dim", m.qk_rope_head_dim),
            ("v_head_dim", m.v_head_dim),
            ("qk_layernorm", True),
            ("attention_output_gate", m.output_gate),
        ]
    if spec.moe is not None:
        e = spec.moe
        out += [
            ("num_moe_experts", e.num_experts),
            ("moe_router_topk", e.experts_per_token),
            ("moe_ffn_hidden_size", e.expert_intermediate_size),
            ("moe_shared_expert_intermediate_size", e.shared_intermediate_size or None),
            ("moe_layer_freq", [1 if f == "moe" else 0 for f in spec.ffn_kinds]),
            ("moe_router_score_function", e.router.activation),
            ("moe_router_enable_expert_bias", e.router.correction_bias),
            ("moe_router_topk_scaling_factor", e.router.scaling_factor),
            ("moe_router_num_groups", e.router.num_groups),
            ("moe_router_group_topk", e.router.topk_groups),
            ("moe_router_dtype", "fp32"),
            ("moe_grouped_gemm", True),
            ("moe_latent_size", e.latent_size),
        ]
    return out


def files(spec: ModelSpec) -> dict[str, str]:
    package = common.package_name(spec, TARGET)
    wm = build_weight_map(spec, "megatron", mxfp4="dequantize")
    what = f"Megatron-Bridge {RELEASE} bridge"
    context = {
        "header": common.header(spec, what),
        "spec": spec,
        "package": package,
        "release": RELEASE,
        "arch": spec.hf.architecture,
        "bridge_class": "".join(part.capitalize() for part in common.snake(spec.name).split("_")) + "Bridge",
        "provider": [(name, value) for name, value in provider(spec)],
        "quantized": spec.quantization is not None,
        "full_rank": spec.kda is not None and spec.kda.output_gate.kind == "full_rank",
        "a_log_shape": tuple(spec.kda.a_log_shape) if spec.kda else (),
        "heads": spec.kda.num_heads if spec.kda else 0,
    }
    out = {
        f"{package}/__init__.py": common.render("megatron_bridge/init.py.j2", **context),
        f"{package}/bridge.py": common.render("megatron_bridge/bridge.py.j2", **context),
        f"{package}/weight_table.py": common.table_source(spec, wm, f"{what}, weight table"),
        "pyproject.toml": common.render("common/pyproject.toml.j2", **context, target=TARGET, entry_points={}),
    }
    for name in ("walk.py", "mxfp4.py"):
        out[f"{package}/{name}"] = common.shipped_source(name, spec)
    return common.finish(out)
