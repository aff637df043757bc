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
from dayone.spec.hf_keys import (
    FIRST_DENSE,
    LAYER_LISTS,
    LAYER_TYPES,
    LINEAR,
    MLP_LAYER_TYPES,
    MOE_FREQ,
    QUANTIZATION,
    TEXT_CONFIG,
    key,
)
from dayone.spec.layout import to_index_lists
from dayone.spec.schema import ModelSpec

EXPERT_COUNT_KEYS = key("moe.num_experts").names
PER_TOKEN_KEYS = key("moe.experts_per_token").names


def text_section(config: dict) -> dict:
    text = config.get(TEXT_CONFIG)
    return text if isinstance(text, dict) else config


def lists_ffn_kinds(config: dict) -> bool:
    """Does the config list every layer's FFN kind (mlp_layer_types), or say first_k_dense_replace?"""
    return MLP_LAYER_TYPES in text_section(config)


def pruned_config(config: dict, spec: ModelSpec, selection: Selection, num_experts: int | None, where: str) -> dict:
    config = json.loads(json.dumps(config))
    text = text_section(config)
    layers = [spec.layers[i] for i in selection.layers]
    text[key("num_layers").hf] = len(layers)

    attention = tuple(layer.attention for layer in layers)
    linear = text.get(LINEAR)
    if isinstance(linear, dict) and any(name in linear for name in LAYER_LISTS.values()):
        lists = to_index_lists(attention)
        for kind, name in LAYER_LISTS.items():
            linear[name] = lists.get(kind, [])
    if LAYER_TYPES in text:
        text[LAYER_TYPES] = [text[LAYER_TYPES][i] for i in selection.layers]

    ffn = [layer.ffn for layer in layers]
    if MLP_LAYER_TYPES in text:
        text[MLP_LAYER_TYPES] = [text[MLP_LAYER_TYPES][i] for i in selection.layers]
    else:
        dense = ffn.count("dense")
        if ffn != ["dense"] * dense + ["moe"] * (len(ffn) - dense):
            raise InputError(
                f"{where}: pruned layers {list(selection.layers)} put a dense FFN after a MoE one, which "
                f"{FIRST_DENSE} cannot describe"
            )
        text[FIRST_DENSE] = dense
        if "moe" in ffn:
            text[MOE_FREQ] = 1

    if num_experts is not None:
        assert spec.moe is not None
        for name in EXPERT_COUNT_KEYS:
            if name in text:
                text[name] = num_experts
        for name in PER_TOKEN_KEYS:
            if name in text:
                text[name] = min(text[name], num_experts)
        groups = spec.moe.router.num_groups
        if num_experts % groups:
            raise InputError(f"--experts {num_experts}: the router has {groups} expert groups; use a multiple")
    if "moe" not in ffn:  # no routed experts left to be quantized (a spec refuses quantization without MoE)
        text.pop(QUANTIZATION, None)
        config.pop(QUANTIZATION, None)
    if selection.block_size is not None:
        text[key("residual.block_size").hf] = selection.block_size
    return config
