"""config.json of a pruned checkpoint: the source's, with every field that counts layers or experts rewritten.

Fields are rewritten where the source has them (K3: inside text_config; Kimi Linear: at the top), under whichever
of their aliases the source uses: num_hidden_layers; linear_attn_config.kda_layers / full_attn_layers (1-based)
and layer_types; first_k_dense_replace or mlp_layer_types; num_experts (num_local_experts, n_routed_experts);
num_experts_per_token (num_experts_per_tok), min'd with the new expert count; attn_res_block_size;
quantization_config is dropped when no MoE layer is kept. Everything else (vision_config, token ids) passes through.
"""

from __future__ import annotations

import json

from dayone.core.errors import InputError
from dayone.prune.layers import Selection
from dayone.spec.layout import to_index_lists
from dayone.spec.schema import ModelSpec

EXPERT_COUNT_KEYS = ("num_experts", "num_local_experts", "n_routed_experts")
PER_TOKEN_KEYS = ("num_experts_per_token", "num_experts_per_tok")


def text_section(config: dict) -> dict:
    text = config.get("text_config")
    return text if isinstance(text, dict) else config


def lists_ffn_kinds(config: dict) -> bool:
    """Does the config list every layer's FFN kind (mlp_layer_types), or say first_k_dense_replace?"""
    return "mlp_layer_types" in text_section(config)


def pruned_config(config: dict, spec: ModelSpec, selection: Selection, num_experts: int | None, where: str) -> dict:
    config = json.loads(json.dumps(config))
    text = text_section(config)
    layers = [spec.layers[i] for i in selection.layers]
    text["num_hidden_layers"] = len(layers)

    attention = tuple(layer.attention for layer in layers)
    linear = text.get("linear_attn_config")
    if isinstance(linear, dict) and ("kda_layers" in linear or "full_attn_layers" in linear):
        lists = to_index_lists(attention)
        linear["kda_layers"] = lists.get("kda", [])
        linear["full_attn_layers"] = lists.get("mla", [])
    if "layer_types" in text:
        text["layer_types"] = [text["layer_types"][i] for i in selection.layers]

    ffn = [layer.ffn for layer in layers]
    if "mlp_layer_types" in text:
        text["mlp_layer_types"] = [text["mlp_layer_types"][i] for i in selection.layers]
    else:
        dense = ffn.count("dense")
        if ffn != ["dense"] * dense + ["moe"] * (len(ffn) - dense):
            raise InputError(
                f"{where}: pruned layers {list(selection.layers)} put a dense FFN after a MoE one, which "
                "first_k_dense_replace cannot describe"
            )
        text["first_k_dense_replace"] = dense
        if "moe" in ffn:
            text["moe_layer_freq"] = 1

    if num_experts is not None:
        assert spec.moe is not None
        for key in EXPERT_COUNT_KEYS:
            if key in text:
                text[key] = num_experts
        for key in PER_TOKEN_KEYS:
            if key in text:
                text[key] = min(text[key], num_experts)
        groups = spec.moe.router.num_groups
        if num_experts % groups:
            raise InputError(f"--experts {num_experts}: the router has {groups} expert groups; use a multiple")
    if "moe" not in ffn:  # no routed experts left to be quantized (a spec refuses quantization without MoE)
        text.pop("quantization_config", None)
        config.pop("quantization_config", None)
    if selection.block_size is not None:
        text["attn_res_block_size"] = selection.block_size
    return config
