"""HF config.json -> ModelSpec, for `kimi_k3` (composite) and `kimi_linear` (including transformers 5.x configs).

Every value of the spec comes from a config field, or from the storage conventions of the model type's releases
(FAMILY_CONVENTIONS) where the config is silent. Contradictions between fields are errors naming the fields.
"""

from __future__ import annotations

from collections.abc import Container
from typing import Any

from dayone.errors import InputError
from dayone.spec.layout import from_index_lists, parse_expression, to_expression
from dayone.spec.registry import validation_message
from dayone.spec.schema import ModelSpec
from pydantic import ValidationError

# What each model type's releases store that config.json does not say.
FAMILY_CONVENTIONS: dict[str, dict[str, Any]] = {
    "kimi_k3": {
        "prefix": "language_model.model.",
        "lm_head": "language_model.lm_head.weight",
        "float32": ["kda.conv", "kda.a_log", "kda.dt_bias", "kda.o_norm", "moe.correction_bias"],
        "a_log_pad_to": 128,  # A_log is stored flat and zero-padded to a multiple of 128 heads
        "passthrough": ["vision_tower.", "mm_projector."],
        "architecture": "KimiK3ForConditionalGeneration",
        # The vendor reference builds q_a/kv_a layernorms with 1e-6, Miles with rms_norm_eps (1e-5); dayone follows
        # Miles, whose numbers the RL gate is measured against (reference/kimi-k3.md).
        "mla_norm_eps": None,
    },
    "kimi_linear": {
        "prefix": "model.",
        "lm_head": "lm_head.weight",
        "float32": ["kda.a_log", "kda.dt_bias"],
        "a_log_pad_to": None,  # A_log is stored as [1, 1, H, 1]
        "passthrough": [],
        "architecture": "KimiLinearForCausalLM",
        # The vendor code and transformers' port build q_a/kv_a layernorms with their default eps, 1e-6, not
        # rms_norm_eps: the independent oracle decides.
        "mla_norm_eps": 1e-6,
    },
}


class _Fields:
    """Reads one config dict; a key may have several names (transformers 5.x renames), which must agree."""

    def __init__(self, data: dict, where: str) -> None:
        self.data, self.where = data, where

    def get(self, *names: str, default: Any = ..., required: bool = True) -> Any:
        found = [(n, self.data[n]) for n in names if n in self.data]
        values = {repr(v) for _, v in found}
        if len(values) > 1:
            shown = ", ".join(f"{n}={v!r}" for n, v in found)
            raise InputError(f"{self.where}: contradictory fields {shown}")
        if found:
            return found[0][1]
        if default is not ...:
            return default
        if required:
            raise InputError(f"{self.where}: missing field {names[0]!r}")
        return None


def derive_spec(
    config: dict,
    name: str,
    tensor_names: Container[str] | None = None,
    num_shards: int | None = None,
    where: str = "config.json",
) -> ModelSpec:
    """Build the spec a config.json describes. tensor_names (from a checkpoint's index) settle naming quirks."""
    if not isinstance(config, dict):
        raise InputError(f"{where}: expected a JSON object")
    model_type = config.get("model_type")
    if model_type not in FAMILY_CONVENTIONS:
        raise InputError(
            f"{where}: model_type {model_type!r} is not supported (known: {', '.join(FAMILY_CONVENTIONS)})"
        )
    conventions = FAMILY_CONVENTIONS[model_type]
    top = _Fields(config, where)
    if model_type == "kimi_k3":
        text_config = top.get("text_config")
        if not isinstance(text_config, dict):
            raise InputError(f"{where}: text_config must be an object")
        text = _Fields(text_config, f"{where}: text_config")
    else:
        text = top

    num_layers = int(text.get("num_hidden_layers"))
    hidden = int(text.get("hidden_size"))
    attention = _attention_layout(text, num_layers)
    ffn = _ffn_layout(text, num_layers)

    spec: dict[str, Any] = {
        "name": name,
        "hf": _identity(config, text_config if model_type == "kimi_k3" else None, conventions),
        "num_layers": num_layers,
        "hidden_size": hidden,
        "vocab_size": text.get("vocab_size"),
        "max_position_embeddings": text.get("max_position_embeddings", "model_max_length"),
        "norm_eps": text.get("rms_norm_eps"),
        "tie_word_embeddings": bool(config.get("tie_word_embeddings", text.data.get("tie_word_embeddings", False))),
        "layout": {"attention": attention, "ffn": ffn},
        "activation": _activation(text),
        "residual": {"kind": "attention", "block_size": text.get("attn_res_block_size")}
        if "attn_res_block_size" in text.data
        else {"kind": "plain"},
    }
    if "kda" in attention:
        spec["kda"] = _kda(text, conventions)
    if "mla" in attention:
        spec["mla"] = _mla(text, conventions)
    if "dense" in ffn:
        spec["dense_intermediate_size"] = text.get("intermediate_size")
    if "moe" in ffn:
        spec["moe"] = _moe(text)
    spec["checkpoint"] = _naming(config, text, conventions, tensor_names, ffn)
    quant = text.data.get("quantization_config", config.get("quantization_config"))
    if quant is not None:
        spec["quantization"] = _quantization(quant, where)
    if "vision_config" in config:
        spec["passthrough"] = {
            "prefixes": conventions["passthrough"],
            "vision": _vision(config["vision_config"], where),
        }
    spec["token_ids"] = _token_ids(config, text)
    if num_shards is not None:
        spec["release"] = {"num_shards": num_shards}
    try:
        return ModelSpec.model_validate(spec)
    except ValidationError as err:
        raise InputError(validation_message(err, where)) from None


def _identity(config: dict, text_config: dict | None, conventions: dict) -> dict:
    # A bare config saved by transformers (no model attached) has no architectures: use the family's.
    archs = config.get("architectures") or [conventions["architecture"]]
    identity = {"architecture": archs[0], "model_type": config["model_type"]}
    if text_config is not None:
        text_archs = text_config.get("architectures") or []
        identity["text_model_type"] = text_config.get("model_type")
        identity["text_architecture"] = text_archs[0] if text_archs else None
    return identity


def _attention_layout(text: _Fields, num_layers: int) -> str | dict:
    linear = text.data.get("linear_attn_config") or {}
    lists = None
    if "kda_layers" in linear or "full_attn_layers" in linear:
        lists = from_index_lists(
            {"kda": list(linear.get("kda_layers", [])), "mla": list(linear.get("full_attn_layers", []))},
            num_layers,
            f"{text.where}: linear_attn_config",
        )
    if "layer_types" in text.data:
        names = {"linear_attention": "kda", "full_attention": "mla"}
        try:
            typed = tuple(names[t] for t in text.data["layer_types"])
        except KeyError as err:
            raise InputError(f"{text.where}: layer_types has unknown kind {err.args[0]!r}") from None
        if len(typed) != num_layers:
            raise InputError(f"{text.where}: layer_types has {len(typed)} entries, num_hidden_layers is {num_layers}")
        if lists is not None and typed != lists:
            raise InputError(f"{text.where}: layer_types contradicts linear_attn_config kda_layers/full_attn_layers")
        lists = typed
    if lists is None:
        raise InputError(
            f"{text.where}: no layer layout (linear_attn_config.kda_layers/full_attn_layers or layer_types)"
        )
    return to_expression(lists)


def _ffn_layout(text: _Fields, num_layers: int) -> str:
    if "mlp_layer_types" in text.data:
        names = {"dense": "dense", "sparse": "moe", "moe": "moe"}
        try:
            kinds = tuple(names[t] for t in text.data["mlp_layer_types"])
        except KeyError as err:
            raise InputError(f"{text.where}: mlp_layer_types has unknown kind {err.args[0]!r}") from None
        if len(kinds) != num_layers:
            raise InputError(
                f"{text.where}: mlp_layer_types has {len(kinds)} entries, num_hidden_layers is {num_layers}"
            )
        return to_expression(kinds)
    first_dense = int(text.get("first_k_dense_replace", default=0))
    freq = int(text.get("moe_layer_freq", default=1))
    if not 0 <= first_dense <= num_layers or freq < 1:
        raise InputError(f"{text.where}: first_k_dense_replace={first_dense} / moe_layer_freq={freq} out of range")
    kinds = tuple("dense" if i < first_dense or (i - first_dense) % freq else "moe" for i in range(num_layers))
    return to_expression(kinds)


def _activation(text: _Fields) -> dict:
    act = text.get("hidden_act")
    if act == "situ":
        return {
            "kind": "situ",
            "beta": text.get("activation_situ_beta"),
            "linear_beta": text.get("activation_situ_linear_beta"),
        }
    if act == "silu":
        return {"kind": "silu"}
    raise InputError(f"{text.where}: hidden_act {act!r} is not supported (silu, situ)")


def _kda(text: _Fields, conventions: dict) -> dict:
    linear = _Fields(text.data.get("linear_attn_config") or {}, f"{text.where}: linear_attn_config")
    heads = int(_either(linear, "num_heads", text, "linear_num_heads"))
    head_dim = int(_either(linear, "head_dim", text, "linear_head_dim"))
    conv = int(_either(linear, "short_conv_kernel_size", text, "linear_conv_kernel_dim", default=4))
    bound = linear.get("gate_lower_bound", default=None, required=False)
    gate = (
        {"kind": "safe", "lower_bound": bound, "rank": head_dim}
        if bound is not None
        else {"kind": "plain", "rank": head_dim}
    )
    full_rank = bool(linear.get("use_full_rank_gate", default=False))
    pad_to = conventions["a_log_pad_to"]
    a_log_shape = [-(-heads // pad_to) * pad_to] if pad_to else [1, 1, heads, 1]
    return {
        "num_heads": heads,
        "head_dim": head_dim,
        "conv_kernel_size": conv,
        "gate": gate,
        "output_gate": {"kind": "full_rank"} if full_rank else {"kind": "low_rank", "rank": head_dim},
        "a_log_shape": a_log_shape,
        "norm_eps": text.get("rms_norm_eps"),
    }


def _either(first: _Fields, first_key: str, second: _Fields, second_key: str, default: Any = ...) -> Any:
    """A value the published config keeps in linear_attn_config and transformers 5.x flattens to the top."""
    a = first.get(first_key, default=None, required=False)
    b = second.get(second_key, default=None, required=False)
    if a is not None and b is not None and a != b:
        raise InputError(
            f"{second.where}: contradictory fields linear_attn_config.{first_key}={a!r}, {second_key}={b!r}"
        )
    if a is None and b is None:
        if default is ...:
            raise InputError(f"{first.where}: missing field {first_key!r}")
        return default
    return a if a is not None else b


def _mla(text: _Fields, conventions: dict) -> dict:
    heads = int(text.get("num_attention_heads"))
    kv_heads = text.get("num_key_value_heads", default=heads)
    if kv_heads not in (None, heads):
        raise InputError(f"{text.where}: num_key_value_heads={kv_heads} differs from num_attention_heads={heads} (MLA)")
    return {
        "num_heads": heads,
        "q_lora_rank": text.get("q_lora_rank", default=None),
        "kv_lora_rank": text.get("kv_lora_rank"),
        "qk_nope_head_dim": text.get("qk_nope_head_dim"),
        "qk_rope_head_dim": text.get("qk_rope_head_dim"),
        "v_head_dim": text.get("v_head_dim"),
        # transformers' kimi_linear is NoPE unconditionally and writes no mla_use_nope.
        "nope": bool(text.get("mla_use_nope", default=True)),
        "output_gate": bool(text.get("mla_use_output_gate", default=False)),
        "norm_eps": conventions["mla_norm_eps"] or text.get("rms_norm_eps"),
    }


def _moe(text: _Fields) -> dict:
    intermediate = int(text.get("moe_intermediate_size"))
    shared = int(text.get("num_shared_experts", "n_shared_experts", default=0))
    latent = text.get("routed_expert_hidden_size", default=None)
    method = text.get("topk_method", default="noaux_tc")
    return {
        "num_experts": text.get("num_experts", "num_local_experts", "n_routed_experts"),
        "experts_per_token": text.get("num_experts_per_token", "num_experts_per_tok"),
        "expert_intermediate_size": intermediate,
        "num_shared_experts": shared,
        "shared_intermediate_size": intermediate * shared,
        "latent_size": latent,
        "latent_norm": bool(text.get("latent_moe_use_norm", default=False)) if latent else False,
        "router": {
            "activation": text.get("moe_router_activation_func", default="sigmoid"),
            "correction_bias": method == "noaux_tc",
            "renormalize": bool(text.get("moe_renormalize", "norm_topk_prob", default=True)),
            "scaling_factor": float(text.get("routed_scaling_factor", default=1.0)),
            "num_groups": int(text.get("num_expert_group", "n_group", default=1)),
            "topk_groups": int(text.get("topk_group", default=1)),
        },
    }


def _naming(config: dict, text: _Fields, conventions: dict, tensor_names: Container[str] | None, ffn: str) -> dict:
    dtype = text.data.get("dtype") or text.data.get("torch_dtype") or config.get("dtype") or config.get("torch_dtype")
    dtype = dtype or "bfloat16"
    if dtype not in ("bfloat16", "float16", "float32"):
        raise InputError(f"{text.where}: dtype {dtype!r} is not supported (bfloat16, float16, float32)")
    naming = {
        "prefix": conventions["prefix"],
        "lm_head": conventions["lm_head"],
        "moe_block": "block_sparse_moe",
        "dtype": dtype,
        "float32": conventions["float32"] if dtype != "float32" else [],
    }
    # transformers 5.x save_pretrained writes the dense layer's MLP under the MoE block's name too.
    dense_block = "mlp"
    if tensor_names is not None:
        dense = [i for i, kind in enumerate(parse_expression(ffn, ("dense", "moe"), "layout.ffn")) if kind == "dense"]
        moe_named = f"{conventions['prefix']}layers.{{}}.block_sparse_moe.gate_proj.weight"
        if dense and moe_named.format(dense[0]) in tensor_names:
            dense_block = "block_sparse_moe"
    elif "mlp_layer_types" in text.data:
        dense_block = "block_sparse_moe"
    if dense_block != "mlp":
        naming["dense_block"] = dense_block
    return naming


def _quantization(quant: dict, where: str) -> dict:
    q = _Fields(quant, f"{where}: quantization_config")
    groups = q.get("config_groups")
    if not isinstance(groups, dict) or not groups:
        raise InputError(f"{where}: quantization_config.config_groups is empty")
    weights = [g.get("weights") or {} for g in groups.values()]
    sizes = {w.get("group_size") for w in weights}
    if len(sizes) != 1:
        raise InputError(f"{where}: quantization_config groups disagree on group_size {sorted(map(str, sizes))}")
    bits = {w.get("num_bits") for w in weights}
    if bits != {4}:
        raise InputError(f"{where}: quantization_config num_bits {sorted(map(str, bits))} is not supported (4)")
    return {
        "method": q.get("quant_method"),
        "format": q.get("format"),
        "group_size": sizes.pop(),
        "ignore": list(q.get("ignore", default=[])),
    }


def _vision(vision: dict, where: str) -> dict:
    v = _Fields(vision, f"{where}: vision_config")
    return {
        "num_layers": v.get("vt_num_hidden_layers"),
        "hidden_size": v.get("vt_hidden_size"),
        "intermediate_size": v.get("vt_intermediate_size"),
        "qkv_hidden_size": v.get("qkv_hidden_size"),
        "num_heads": v.get("vt_num_attention_heads"),
        "patch_size": v.get("patch_size"),
        "pos_emb_height": v.get("init_pos_emb_height"),
        "pos_emb_width": v.get("init_pos_emb_width"),
        "pos_emb_time": v.get("init_pos_emb_time"),
        "merge_kernel_size": v.get("merge_kernel_size"),
        "mm_hidden_size": v.get("mm_hidden_size"),
    }


def _token_ids(config: dict, text: _Fields) -> dict:
    ids = {}
    for key, field in (
        ("bos", "bos_token_id"),
        ("eos", "eos_token_id"),
        ("pad", "pad_token_id"),
        ("media_placeholder", "media_placeholder_token_id"),
    ):
        value = config.get(field, text.data.get(field))
        if isinstance(value, list):  # transformers allows several eos ids; the first is the one generation stops on
            value = value[0] if value else None
        if value is not None:
            ids[key] = value
    return ids
