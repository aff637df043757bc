"""HF config.json -> ModelSpec, for `kimi_k3` (composite) and `kimi_linear` (including transformers 5.x configs).

Every value of the spec comes from a config field, from config.json's `dayone` block (spec fields HF has no key for,
config_block.py), or from the storage conventions of the model type's releases where the config is silent: a
conventions file (spec/conventions/<model_type>.yaml, found by family.py) or the config's own conventions block.
Contradictions between fields are errors naming the fields.
"""

from __future__ import annotations

import math
import re
from collections.abc import Container, Sequence
from pathlib import Path
from typing import Any

from dayone.core.errors import InputError
from dayone.core.vocabulary import DTYPES
from dayone.spec.bounds import MAX_DIM, MAX_INTERMEDIATE, MAX_LAYERS, MAX_TOKEN_ID
from dayone.spec.config_block import FIELDS, DayoneBlock, read_block
from dayone.spec.family import FamilyConventions, conventions_for
from dayone.spec.layout import from_index_lists, parse_expression, to_expression
from dayone.spec.registry import validation_message
from dayone.spec.schema import MODEL_TYPE_PATTERN, ModelSpec, is_identifier
from pydantic import ValidationError

_MODEL_TYPE = re.compile(MODEL_TYPE_PATTERN)


class _Fields:
    """Reads one config dict; a key may have several names (transformers 5.x renames), which must agree.

    The typed readers (integer, real, flag, text) take the JSON type the field has in published configs and
    nothing else: "93" is not 93 and 93.0 is not 93, so a config means what it says or is refused, naming the field.
    """

    def __init__(self, data: dict, where: str) -> None:
        if not isinstance(data, dict):
            raise InputError(f"{where}: expected an object, got {_json_type(data)}")
        self.data, self.where = data, where

    def get(self, *names: str, default: Any = ..., required: bool = True) -> Any:
        return self._found(names, default, required)[1]

    def _found(self, names: tuple[str, ...], default: Any = ..., required: bool = True) -> tuple[str, Any]:
        found = [(n, self.data[n]) for n in names if n in self.data]
        values = {repr(v) for _, v in found}
        if len(values) > 1:
            shown = ", ".join(f"{n}={v!r:.40}" for n, v in found)
            raise InputError(f"{self.where}: contradictory fields {shown}")
        if found:
            return found[0]
        if default is not ...:
            return names[0], default
        if required:
            raise InputError(f"{self.where}: missing field {names[0]!r}")
        return names[0], None

    def integer(self, *names: str, default: Any = ..., limit: int | None = None) -> Any:
        name, value = self._found(names, default)
        if value is None and default is None:
            return None
        return _integer(value, f"{self.where}: {name}", limit)

    def real(self, *names: str, default: Any = ...) -> Any:
        name, value = self._found(names, default)
        if value is None and default is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise InputError(f"{self.where}: {name} must be a finite number, got {_shown(value)}")
        return value

    def flag(self, *names: str, default: bool) -> bool:
        name, value = self._found(names, default)
        if not isinstance(value, bool):
            raise InputError(f"{self.where}: {name} must be true or false, got {_shown(value)}")
        return value

    def text(self, *names: str, default: Any = ...) -> Any:
        name, value = self._found(names, default)
        if value is None and default is None:
            return None
        if not isinstance(value, str):
            raise InputError(f"{self.where}: {name} must be a string, got {_shown(value)}")
        return value


def _integer(value: Any, field: str, limit: int | None = None, minimum: int = 1) -> int:
    """An int (not a bool, a float or a numeric string); with a limit, inside minimum..limit (the schema checks the
    rest: this is for numbers used before the spec is built, such as the layer count)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputError(f"{field} must be an integer, got {_shown(value)}")
    if limit is not None and not minimum <= value <= limit:
        raise InputError(f"{field}={value} is outside {minimum}..{limit}")
    return value


def _json_type(value: Any) -> str:
    names = {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}
    return names.get(type(value), "a number")


def _shown(value: Any) -> str:
    """A wrong value in a message: its JSON type, and the value itself when it is short."""
    text = repr(value) if isinstance(value, str | int | float | bool) or value is None else ""
    return f"{_json_type(value)} {text}"[:60].rstrip() if len(text) <= 40 else _json_type(value)


def derive_spec(
    config: dict,
    name: str,
    tensor_names: Container[str] | None = None,
    num_shards: int | None = None,
    where: str = "config.json",
    conventions_dirs: Sequence[Path] = (),
) -> ModelSpec:
    """Build the spec a config.json describes. tensor_names (from a checkpoint's index) settle naming quirks;
    conventions_dirs are searched for the model type's conventions file before $DAYONE_CONVENTIONS and the shipped."""
    return derive_with_conventions(config, name, tensor_names, num_shards, where, conventions_dirs)[0]


def derive_with_conventions(
    config: dict,
    name: str,
    tensor_names: Container[str] | None = None,
    num_shards: int | None = None,
    where: str = "config.json",
    conventions_dirs: Sequence[Path] = (),
) -> tuple[ModelSpec, FamilyConventions]:
    """derive_spec, and the conventions it used (their `source` names the file)."""
    if not isinstance(config, dict):
        raise InputError(f"{where}: expected a JSON object")
    block = read_block(config, where)
    model_type = config.get("model_type")
    conventions = conventions_for(model_type, conventions_dirs, block.conventions, where)
    top = _Fields(config, where)
    if conventions.text_config:
        text_config = top.get("text_config")
        if not isinstance(text_config, dict):
            raise InputError(f"{where}: text_config must be an object")
        text = _Fields(text_config, f"{where}: text_config")
    else:
        text = top

    num_layers = text.integer("num_hidden_layers", limit=MAX_LAYERS)  # bounded before any table is built from it
    hidden = text.integer("hidden_size", limit=MAX_DIM)
    attention = _attention_layout(text, num_layers)
    ffn = _ffn_layout(text, num_layers)

    spec: dict[str, Any] = {
        "name": name,
        "hf": _identity(config, text_config if conventions.text_config else None, conventions, where),
        "num_layers": num_layers,
        "hidden_size": hidden,
        "vocab_size": text.integer("vocab_size"),
        "max_position_embeddings": text.integer("max_position_embeddings", "model_max_length"),
        "norm_eps": text.real("rms_norm_eps"),
        "tie_word_embeddings": top.flag("tie_word_embeddings", default=text.flag("tie_word_embeddings", default=False)),
        "layout": {"attention": attention, "ffn": ffn},
        "activation": _activation(text),
        "residual": {"kind": "attention", "block_size": text.integer("attn_res_block_size")}
        if "attn_res_block_size" in text.data
        else {"kind": "plain"},
    }
    if "kda" in attention:
        spec["kda"] = _kda(text, conventions)
    if "mla" in attention:
        spec["mla"] = _mla(text, conventions)
    if "dense" in ffn:
        spec["dense_intermediate_size"] = text.integer("intermediate_size")
    if "moe" in ffn:
        spec["moe"] = _moe(text)
    spec["checkpoint"] = _naming(config, text, conventions, tensor_names, ffn)
    quant = text.data.get("quantization_config", config.get("quantization_config"))
    if quant is not None:
        spec["quantization"] = _quantization(quant, where)
    if config.get("vision_config") is not None:
        spec["passthrough"] = {
            "prefixes": list(conventions.passthrough),
            "vision": _vision(config["vision_config"], where),
        }
    spec["token_ids"] = _token_ids(config, text)
    if num_shards is not None:
        spec["release"] = {"num_shards": num_shards}
    _apply_block(spec, block)
    try:
        return ModelSpec.model_validate(spec), conventions
    except ValidationError as err:
        raise InputError(validation_message(err, where)) from None


def _apply_block(spec: dict, block: DayoneBlock) -> None:
    """The dayone block's fields over what the vendor keys and the conventions gave (config_block.FIELDS)."""
    for (section, field), path in FIELDS.items():
        value = getattr(getattr(block, section), field)
        if value is None:
            continue
        parent = spec.get(path[0])
        if not isinstance(parent, dict):
            continue  # no layer uses the section (a checkpoint pruned to its first layers): unused, as its vendor keys
        for key in path[1:-1]:
            parent = parent[key]
        parent[path[-1]] = list(value) if isinstance(value, tuple) else value
    if block.conventions is not None:
        spec["conventions"] = block.conventions.model_dump(mode="json", exclude_none=True)


def _identity(config: dict, text_config: dict | None, conventions: FamilyConventions, where: str) -> dict:
    # A bare config saved by transformers (no model attached) has no architectures: use the family's.
    archs = _architectures(config, where) or [conventions.architecture]
    identity = {"architecture": archs[0], "model_type": config["model_type"]}
    if text_config is not None:
        text_archs = _architectures(text_config, f"{where}: text_config")
        text_type = text_config.get("model_type")
        if text_type is not None and not (isinstance(text_type, str) and _MODEL_TYPE.fullmatch(text_type)):
            raise InputError(f"{where}: text_config.model_type {_shown(text_type)} is not a model type name")
        identity["text_model_type"] = text_type
        identity["text_architecture"] = text_archs[0] if text_archs else None
    return identity


def _architectures(config: dict, where: str) -> list[str]:
    """config["architectures"]: a list of class names. The first is written into generated code as a class name."""
    archs = config.get("architectures")
    if archs is None:
        return []
    if not isinstance(archs, list):
        raise InputError(f"{where}: architectures must be a list of class names, got {_shown(archs)}")
    if archs and not is_identifier(archs[0]):
        raise InputError(f"{where}: architectures[0] {_shown(archs[0])} is not a Python class name")
    return archs


def _kinds(text: _Fields, key: str, names: dict[str, str]) -> tuple[str, ...]:
    """A per-layer list of kind names (layer_types, mlp_layer_types), each one of `names`."""
    values = text.data[key]
    if not isinstance(values, list):
        raise InputError(f"{text.where}: {key} must be a list of layer kinds, got {_shown(values)}")
    for value in values:
        if not isinstance(value, str) or value not in names:
            raise InputError(f"{text.where}: {key} has unknown kind {_shown(value)} (known: {', '.join(names)})")
    return tuple(names[v] for v in values)


def _layer_list(linear: dict, key: str, where: str) -> list:
    values = linear.get(key, [])
    if not isinstance(values, list):
        raise InputError(f"{where}.{key} must be a list of layer numbers, got {_shown(values)}")
    return values


def _attention_layout(text: _Fields, num_layers: int) -> str | dict:
    linear = text.data.get("linear_attn_config") or {}
    where = f"{text.where}: linear_attn_config"
    if not isinstance(linear, dict):
        raise InputError(f"{where} must be an object, got {_shown(linear)}")
    lists = None
    if "kda_layers" in linear or "full_attn_layers" in linear:
        lists = from_index_lists(
            {"kda": _layer_list(linear, "kda_layers", where), "mla": _layer_list(linear, "full_attn_layers", where)},
            num_layers,
            where,
        )
    if "layer_types" in text.data:
        typed = _kinds(text, "layer_types", {"linear_attention": "kda", "full_attention": "mla"})
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
        kinds = _kinds(text, "mlp_layer_types", {"dense": "dense", "sparse": "moe", "moe": "moe"})
        if len(kinds) != num_layers:
            raise InputError(
                f"{text.where}: mlp_layer_types has {len(kinds)} entries, num_hidden_layers is {num_layers}"
            )
        return to_expression(kinds)
    first_dense = text.integer("first_k_dense_replace", default=0)
    freq = text.integer("moe_layer_freq", default=1)
    if not 0 <= first_dense <= num_layers or freq < 1:
        raise InputError(f"{text.where}: first_k_dense_replace={first_dense} / moe_layer_freq={freq} out of range")
    kinds = tuple("dense" if i < first_dense or (i - first_dense) % freq else "moe" for i in range(num_layers))
    return to_expression(kinds)


def _activation(text: _Fields) -> dict:
    act = text.text("hidden_act")
    if act == "situ":
        return {
            "kind": "situ",
            "beta": text.real("activation_situ_beta"),
            "linear_beta": text.real("activation_situ_linear_beta"),
        }
    if act == "silu":
        return {"kind": "silu"}
    raise InputError(f"{text.where}: hidden_act {act!r} is not supported (silu, situ)")


def _kda(text: _Fields, conventions: FamilyConventions) -> dict:
    linear = _Fields(text.data.get("linear_attn_config") or {}, f"{text.where}: linear_attn_config")
    heads = _integer(_either(linear, "num_heads", text, "linear_num_heads"), f"{linear.where}: num_heads", MAX_DIM)
    head_dim = _integer(_either(linear, "head_dim", text, "linear_head_dim"), f"{linear.where}: head_dim", MAX_DIM)
    conv = _integer(
        _either(linear, "short_conv_kernel_size", text, "linear_conv_kernel_dim", default=4),
        f"{linear.where}: short_conv_kernel_size",
    )
    bound = linear.real("gate_lower_bound", default=None)
    # The vendor configs have no key for the gate ranks: the releases' are head_dim (the dayone block may say else).
    gate = (
        {"kind": "safe", "lower_bound": bound, "rank": head_dim}
        if bound is not None
        else {"kind": "plain", "rank": head_dim}
    )
    full_rank = linear.flag("use_full_rank_gate", default=False)
    pad_to = conventions.a_log_pad_to
    a_log_shape = [-(-heads // pad_to) * pad_to] if conventions.a_log_layout == "flat" else [1, 1, heads, 1]
    return {
        "num_heads": heads,
        "head_dim": head_dim,
        "conv_kernel_size": conv,
        "gate": gate,
        "output_gate": {"kind": "full_rank"} if full_rank else {"kind": "low_rank", "rank": head_dim},
        "a_log_shape": a_log_shape,
        "norm_eps": text.real("rms_norm_eps"),
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


def _mla(text: _Fields, conventions: FamilyConventions) -> dict:
    heads = text.integer("num_attention_heads")
    kv_heads = text.get("num_key_value_heads", default=heads)
    if kv_heads not in (None, heads):
        raise InputError(f"{text.where}: num_key_value_heads={kv_heads} differs from num_attention_heads={heads} (MLA)")
    nope = text.flag("mla_use_nope", default=conventions.mla_use_nope)
    return {
        "num_heads": heads,
        "q_lora_rank": text.integer("q_lora_rank", default=None),
        "kv_lora_rank": text.integer("kv_lora_rank"),
        "qk_nope_head_dim": text.integer("qk_nope_head_dim"),
        "qk_rope_head_dim": text.integer("qk_rope_head_dim"),
        "v_head_dim": text.integer("v_head_dim"),
        # A config without mla_use_nope means what the family's releases do (conventions.mla_use_nope): transformers'
        # kimi_linear is NoPE unconditionally and writes none; a DeepSeek-V3-like family rotates.
        "nope": nope,
        "rope": None if nope else _mla_rope(text),
        "output_gate": text.flag("mla_use_output_gate", default=False),
        "norm_eps": text.real("rms_norm_eps")
        if conventions.mla_norm_eps == "rms_norm_eps"
        else conventions.mla_norm_eps,
    }


# the keys of a yarn rope_scaling (DeepSeek-V3's config.json) that mla.rope.scaling takes, under the same names
_YARN_KEYS = ("factor", "original_max_position_embeddings", "beta_fast", "beta_slow", "mscale", "mscale_all_dim")


def _mla_rope(text: _Fields) -> dict:
    """mla.rope of a rotary MLA: rope_theta, rope_interleave (transformers' DeepSeek-V3 default: true) and
    rope_scaling as DeepSeek-V3 writes them, or transformers 5.x's rope_parameters (theta and scaling in one)."""
    params = text.get("rope_parameters", default=None)
    nested = _Fields(params, f"{text.where}: rope_parameters") if params is not None else None
    theta = _either(text, "rope_theta", nested, "rope_theta") if nested else text.real("rope_theta")
    scaling = text.get("rope_scaling", default=None)
    where = f"{text.where}: rope_scaling"
    if scaling is None and nested is not None:
        scaling, where = params, nested.where
    rope: dict[str, Any] = {"theta": theta, "interleave": text.flag("rope_interleave", default=True)}
    if scaling is None:
        return rope
    fields = _Fields(scaling, where)
    kind = fields.text("type", "rope_type", default="default")
    if kind == "default":
        return rope
    if kind != "yarn":
        raise InputError(f"{where}: type {kind!r} is not implemented for MLA rope (yarn or default)")
    if fields.get("truncate", default=True) is not True:
        raise InputError(f"{where}: truncate {fields.data['truncate']!r} is not implemented (the yarn ramp rounds)")
    known = {"type", "rope_type", "rope_theta", "truncate", *_YARN_KEYS}
    for key in fields.data:
        if key not in known:
            raise InputError(f"{where}: {key} is not implemented for yarn MLA rope")
    yarn = {"kind": "yarn", "factor": float(fields.real("factor")),
            "original_max_position_embeddings": fields.integer("original_max_position_embeddings")}  # fmt: skip
    for key in _YARN_KEYS[2:]:
        value = fields.real(key, default=None)
        if value is not None:
            yarn[key] = float(value)
    rope["scaling"] = yarn
    return rope


def _moe(text: _Fields) -> dict:
    intermediate = text.integer("moe_intermediate_size", limit=MAX_INTERMEDIATE)
    shared = text.integer("num_shared_experts", "n_shared_experts", default=0)
    latent = text.integer("routed_expert_hidden_size", default=None)
    method = text.text("topk_method", default="noaux_tc")
    return {
        "num_experts": text.integer("num_experts", "num_local_experts", "n_routed_experts"),
        "experts_per_token": text.integer("num_experts_per_token", "num_experts_per_tok"),
        "expert_intermediate_size": intermediate,
        "num_shared_experts": shared,
        "shared_intermediate_size": intermediate * shared,
        "latent_size": latent,
        "latent_norm": text.flag("latent_moe_use_norm", default=False) if latent else False,
        "router": {
            "activation": text.text("moe_router_activation_func", default="sigmoid"),
            "correction_bias": method == "noaux_tc",
            "renormalize": text.flag("moe_renormalize", "norm_topk_prob", default=True),
            "scaling_factor": float(text.real("routed_scaling_factor", default=1.0)),
            "num_groups": text.integer("num_expert_group", "n_group", default=1),
            "topk_groups": text.integer("topk_group", default=1),
        },
    }


def _naming(
    config: dict, text: _Fields, conventions: FamilyConventions, tensor_names: Container[str] | None, ffn: str
) -> dict:
    dtype = text.data.get("dtype") or text.data.get("torch_dtype") or config.get("dtype") or config.get("torch_dtype")
    dtype = dtype or "bfloat16"
    if dtype not in DTYPES:
        raise InputError(f"{text.where}: dtype {dtype!r} is not supported ({', '.join(DTYPES)})")
    naming = {
        "prefix": conventions.prefix,
        "lm_head": conventions.lm_head,
        "moe_block": "block_sparse_moe",
        "dtype": dtype,
        "float32": list(conventions.float32) if dtype != "float32" else [],
    }
    # transformers 5.x save_pretrained writes the dense layer's MLP under the MoE block's name too.
    dense_block = "mlp"
    if tensor_names is not None:
        dense = [i for i, kind in enumerate(parse_expression(ffn, ("dense", "moe"), "layout.ffn")) if kind == "dense"]
        moe_named = f"{conventions.prefix}layers.{{}}.block_sparse_moe.gate_proj.weight"
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
    if not isinstance(groups, dict):
        raise InputError(
            f"{where}: quantization_config.config_groups must be an object of groups, got {_shown(groups)}"
        )
    if not groups:
        raise InputError(f"{where}: quantization_config.config_groups is empty")
    weights = []
    for key, group in groups.items():
        field = f"{where}: quantization_config.config_groups.{key}"
        group = _Fields(group, field)
        weights.append(_Fields(group.get("weights", default=None) or {}, f"{field}.weights"))
    sizes = {w.integer("group_size", default=None) for w in weights}
    if len(sizes) != 1:
        raise InputError(f"{where}: quantization_config groups disagree on group_size {sorted(map(str, sizes))}")
    bits = {w.integer("num_bits", default=None) for w in weights}
    if bits != {4}:
        raise InputError(f"{where}: quantization_config num_bits {sorted(map(str, bits))} is not supported (4)")
    ignore = q.get("ignore", default=[])
    if not isinstance(ignore, list):
        raise InputError(f"{where}: quantization_config.ignore must be a list of names, got {_shown(ignore)}")
    return {
        "method": q.text("quant_method"),
        "format": q.text("format"),
        "group_size": sizes.pop(),
        "ignore": ignore,
    }


def _vision(vision: dict, where: str) -> dict:
    v = _Fields(vision, f"{where}: vision_config")
    merge = v.get("merge_kernel_size")
    if not isinstance(merge, list) or len(merge) != 2:
        raise InputError(
            f"{where}: vision_config.merge_kernel_size must be a list of two integers, got {_shown(merge)}"
        )
    return {
        "num_layers": v.integer("vt_num_hidden_layers"),
        "hidden_size": v.integer("vt_hidden_size"),
        "intermediate_size": v.integer("vt_intermediate_size"),
        "qkv_hidden_size": v.integer("qkv_hidden_size"),
        "num_heads": v.integer("vt_num_attention_heads"),
        "patch_size": v.integer("patch_size"),
        "pos_emb_height": v.integer("init_pos_emb_height"),
        "pos_emb_width": v.integer("init_pos_emb_width"),
        "pos_emb_time": v.integer("init_pos_emb_time"),
        "merge_kernel_size": [_integer(m, f"{where}: vision_config.merge_kernel_size") for m in merge],
        "mm_hidden_size": v.integer("mm_hidden_size"),
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
            ids[key] = _integer(value, f"{text.where}: {field}", MAX_TOKEN_ID, minimum=0)
    return ids
