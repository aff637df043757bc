"""HF config.json -> ModelSpec, for `kimi_k3` (composite) and `kimi_linear` (including transformers 5.x configs).

Every value of the spec comes from a config field (the keys that carry one spec field each through spec/hf_keys.py's
CONFIG_MAPPING, which hf_config.py writes from too), from config.json's `dayone` block (spec fields HF has no key for,
config_block.py), or from the storage conventions of the model type's releases where the config is silent: a
conventions file (spec/conventions/<model_type>.yaml, found by family.py) or the config's own conventions block.
Contradictions between fields are errors naming the fields.
"""

from __future__ import annotations

import math
import re
from collections.abc import Container, Sequence
from pathlib import Path
from typing import Any, TypedDict, Unpack

from dayone.core.errors import InputError
from dayone.core.vocabulary import DTYPES
from dayone.spec.bounds import MAX_TOKEN_ID
from dayone.spec.config_block import FIELDS, DayoneBlock, read_block
from dayone.spec.family import FamilyConventions, conventions_for
from dayone.spec.hf_keys import (
    ARCHITECTURES,
    DTYPE_KEYS,
    FIRST_DENSE,
    FULL_RANK_GATE,
    KV_HEADS,
    LAYER_LISTS,
    LAYER_TYPE_KINDS,
    LAYER_TYPES,
    LINEAR,
    MLP_LAYER_KINDS,
    MLP_LAYER_TYPES,
    MODEL_TYPE,
    MOE_FREQ,
    QUANT_BITS,
    QUANT_FORMAT,
    QUANT_GROUP_SIZE,
    QUANT_GROUPS,
    QUANT_IGNORE,
    QUANT_METHOD,
    QUANT_WEIGHTS,
    QUANTIZATION,
    REQUIRED,
    ROPE_KIND_KEYS,
    ROPE_PARAMETERS,
    ROPE_SCALING,
    TEXT_CONFIG,
    TOPK_METHOD,
    VISION,
    lookup,
)
from dayone.spec.hf_keys import key as hf_key
from dayone.spec.hf_keys import section as hf_section
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
        found = [(n, value) for n in names for ok, value in [lookup(self.data, n)] if ok]  # n may be dotted
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

    def field(self, spec_path: str, default: Any = REQUIRED) -> Any:
        """The spec field's value from its config key (hf_keys.CONFIG_MAPPING: names, type, default, limit); a
        default given here (the family's conventions) stands for the table's."""
        k = hf_key(spec_path)
        default = k.default if default is REQUIRED else default
        name, value = self._found(k.names, default)
        if value is None and default is None or k.kind == "value":
            return value
        field = f"{self.where}: {name}"
        if k.kind == "int":
            return _integer(value, field, k.limit)
        if k.kind == "real":
            if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
                raise InputError(f"{field} must be a finite number, got {_shown(value)}")
        elif not isinstance(value, bool if k.kind == "flag" else str):
            raise InputError(
                f"{field} must be {'true or false' if k.kind == 'flag' else 'a string'}, got {_shown(value)}"
            )
        return value

    def has(self, spec_path: str) -> bool:
        return any(lookup(self.data, name)[0] for name in hf_key(spec_path).names)

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


class DeriveOptions(TypedDict, total=False):
    tensor_names: Container[str] | None
    num_shards: int | None
    where: str
    conventions_dirs: Sequence[Path]


def derive_spec(config: dict, name: str, **options: Unpack[DeriveOptions]) -> ModelSpec:
    """Build the spec a config.json describes (the options: derive_with_conventions)."""
    return derive_with_conventions(config, name, **options)[0]


def derive_with_conventions(
    config: dict,
    name: str,
    *,
    tensor_names: Container[str] | None = None,
    num_shards: int | None = None,
    where: str = "config.json",
    conventions_dirs: Sequence[Path] = (),
) -> tuple[ModelSpec, FamilyConventions]:
    """derive_spec, and the conventions it used (their `source` names the file). tensor_names (from a checkpoint's
    index) settle naming quirks; conventions_dirs are searched for the model type's conventions file before
    $DAYONE_CONVENTIONS and the shipped ones; num_shards goes to the spec's release section."""
    if not isinstance(config, dict):
        raise InputError(f"{where}: expected a JSON object")
    block = read_block(config, where)
    model_type = config.get(MODEL_TYPE)
    conventions = conventions_for(model_type, conventions_dirs, block.conventions, where)
    top = _Fields(config, where)
    if conventions.text_config:
        text_config = top.get(TEXT_CONFIG)
        if not isinstance(text_config, dict):
            raise InputError(f"{where}: {TEXT_CONFIG} must be an object")
        text = _Fields(text_config, f"{where}: {TEXT_CONFIG}")
    else:
        text = top

    num_layers = text.field("num_layers")  # bounded (the table's limit) before any table is built from it
    hidden = text.field("hidden_size")
    attention = _attention_layout(text, num_layers)
    ffn = _ffn_layout(text, num_layers)

    spec: dict[str, Any] = {
        "name": name,
        "hf": _identity(config, text_config if conventions.text_config else None, conventions, where),
        "num_layers": num_layers,
        "hidden_size": hidden,
        "vocab_size": text.field("vocab_size"),
        "max_position_embeddings": text.field("max_position_embeddings"),
        "norm_eps": text.field("norm_eps"),
        "tie_word_embeddings": top.field("tie_word_embeddings", default=text.field("tie_word_embeddings")),
        "layout": {"attention": attention, "ffn": ffn},
        "activation": _activation(text),
        "residual": {"kind": "attention", "block_size": text.field("residual.block_size")}
        if text.has("residual.block_size")
        else {"kind": "plain"},
    }
    if "kda" in attention:
        spec["kda"] = _kda(text, conventions)
    if "mla" in attention:
        spec["mla"] = _mla(text, conventions)
    if "dense" in ffn:
        spec["dense_intermediate_size"] = text.field("dense_intermediate_size")
    if "moe" in ffn:
        spec["moe"] = _moe(text)
    spec["checkpoint"] = _naming(config, text, conventions, tensor_names, ffn)
    quant = text.data.get(QUANTIZATION, config.get(QUANTIZATION))
    if quant is not None:
        spec["quantization"] = _quantization(quant, where)
    if config.get(VISION) is not None:
        spec["passthrough"] = {"prefixes": list(conventions.passthrough), "vision": _vision(top)}
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
    identity = {"architecture": archs[0], "model_type": config[MODEL_TYPE]}
    if text_config is not None:
        text_archs = _architectures(text_config, f"{where}: {TEXT_CONFIG}")
        text_type = text_config.get(MODEL_TYPE)
        if text_type is not None and not (isinstance(text_type, str) and _MODEL_TYPE.fullmatch(text_type)):
            raise InputError(f"{where}: {TEXT_CONFIG}.{MODEL_TYPE} {_shown(text_type)} is not a model type name")
        identity["text_model_type"] = text_type
        identity["text_architecture"] = text_archs[0] if text_archs else None
    return identity


def _architectures(config: dict, where: str) -> list[str]:
    """config["architectures"]: a list of class names. The first is written into generated code as a class name."""
    archs = config.get(ARCHITECTURES)
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
    linear = text.data.get(LINEAR) or {}
    where = f"{text.where}: {LINEAR}"
    if not isinstance(linear, dict):
        raise InputError(f"{where} must be an object, got {_shown(linear)}")
    lists = None
    named = "/".join(LAYER_LISTS.values())
    if any(name in linear for name in LAYER_LISTS.values()):
        lists = from_index_lists(
            {kind: _layer_list(linear, name, where) for kind, name in LAYER_LISTS.items()}, num_layers, where
        )
    if LAYER_TYPES in text.data:
        typed = _kinds(text, LAYER_TYPES, LAYER_TYPE_KINDS)
        if len(typed) != num_layers:
            raise InputError(
                f"{text.where}: {LAYER_TYPES} has {len(typed)} entries, {hf_key('num_layers').hf} is {num_layers}"
            )
        if lists is not None and typed != lists:
            raise InputError(f"{text.where}: {LAYER_TYPES} contradicts {LINEAR} {named}")
        lists = typed
    if lists is None:
        raise InputError(f"{text.where}: no layer layout ({LINEAR}.{named} or {LAYER_TYPES})")
    return to_expression(lists)


def _ffn_layout(text: _Fields, num_layers: int) -> str:
    if MLP_LAYER_TYPES in text.data:
        kinds = _kinds(text, MLP_LAYER_TYPES, MLP_LAYER_KINDS)
        if len(kinds) != num_layers:
            raise InputError(
                f"{text.where}: {MLP_LAYER_TYPES} has {len(kinds)} entries, {hf_key('num_layers').hf} is {num_layers}"
            )
        return to_expression(kinds)
    first_dense = text.integer(FIRST_DENSE, default=0)
    freq = text.integer(MOE_FREQ, default=1)
    if not 0 <= first_dense <= num_layers or freq < 1:
        raise InputError(f"{text.where}: {FIRST_DENSE}={first_dense} / {MOE_FREQ}={freq} out of range")
    kinds = tuple("dense" if i < first_dense or (i - first_dense) % freq else "moe" for i in range(num_layers))
    return to_expression(kinds)


def _activation(text: _Fields) -> dict:
    act = text.field("activation.kind")
    if act == "situ":
        return {
            "kind": "situ",
            "beta": text.field("activation.beta"),
            "linear_beta": text.field("activation.linear_beta"),
        }
    if act == "silu":
        return {"kind": "silu"}
    raise InputError(f"{text.where}: {hf_key('activation.kind').hf} {act!r} is not supported (silu, situ)")


def _kda(text: _Fields, conventions: FamilyConventions) -> dict:
    linear = _Fields(text.data.get(LINEAR) or {}, f"{text.where}: {LINEAR}")
    heads, head_dim = text.field("kda.num_heads"), text.field("kda.head_dim")
    conv = text.field("kda.conv_kernel_size")
    bound = text.field("kda.gate.lower_bound")
    # The vendor configs have no key for the gate ranks: the releases' are head_dim (the dayone block may say else).
    gate = (
        {"kind": "safe", "lower_bound": bound, "rank": head_dim}
        if bound is not None
        else {"kind": "plain", "rank": head_dim}
    )
    full_rank = linear.flag(FULL_RANK_GATE, default=False)
    pad_to = conventions.a_log_pad_to
    a_log_shape = [-(-heads // pad_to) * pad_to] if conventions.a_log_layout == "flat" else [1, 1, heads, 1]
    return {
        "num_heads": heads,
        "head_dim": head_dim,
        "conv_kernel_size": conv,
        "gate": gate,
        "output_gate": {"kind": "full_rank"} if full_rank else {"kind": "low_rank", "rank": head_dim},
        "a_log_shape": a_log_shape,
        "norm_eps": text.field("norm_eps"),
    }


def _mla(text: _Fields, conventions: FamilyConventions) -> dict:
    heads = text.field("mla.num_heads")
    kv_heads = text.get(KV_HEADS, default=heads)
    if kv_heads not in (None, heads):
        raise InputError(f"{text.where}: {KV_HEADS}={kv_heads} differs from {hf_key('mla.num_heads').hf}={heads} (MLA)")
    nope = text.field("mla.nope", default=conventions.mla_use_nope)
    return {
        "num_heads": heads,
        **{name: text.field(f"mla.{name}") for name in ("q_lora_rank", "kv_lora_rank", "qk_nope_head_dim")},
        **{name: text.field(f"mla.{name}") for name in ("qk_rope_head_dim", "v_head_dim")},
        # A config without mla_use_nope means what the family's releases do (conventions.mla_use_nope): transformers'
        # kimi_linear is NoPE unconditionally and writes none; a DeepSeek-V3-like family rotates.
        "nope": nope,
        "rope": None if nope else _mla_rope(text),
        "output_gate": text.field("mla.output_gate"),
        "norm_eps": text.field("norm_eps") if conventions.mla_norm_eps == "rms_norm_eps" else conventions.mla_norm_eps,
    }


# the keys of a yarn rope_scaling (DeepSeek-V3's config.json) that mla.rope.scaling takes, under the same names
_YARN_KEYS = ("factor", "original_max_position_embeddings", "beta_fast", "beta_slow", "mscale", "mscale_all_dim")


def _mla_rope(text: _Fields) -> dict:
    """mla.rope of a rotary MLA: rope_theta, rope_interleave (transformers' DeepSeek-V3 default: true) and
    rope_scaling as DeepSeek-V3 writes them, or transformers 5.x's rope_parameters (theta and scaling in one)."""
    params = text.get(ROPE_PARAMETERS, default=None)
    nested = _Fields(params, f"{text.where}: {ROPE_PARAMETERS}") if params is not None else None
    theta = text.field("mla.rope.theta")  # rope_theta, or transformers 5.x's rope_parameters.rope_theta
    scaling = text.get(ROPE_SCALING, default=None)
    where = f"{text.where}: {ROPE_SCALING}"
    if scaling is None and nested is not None:
        scaling, where = params, nested.where
    rope: dict[str, Any] = {"theta": theta, "interleave": text.field("mla.rope.interleave")}
    if scaling is None:
        return rope
    fields = _Fields(scaling, where)
    kind = fields.text(*ROPE_KIND_KEYS, default="default")
    if kind == "default":
        return rope
    if kind != "yarn":
        raise InputError(f"{where}: type {kind!r} is not implemented for MLA rope (yarn or default)")
    if fields.get("truncate", default=True) is not True:
        raise InputError(f"{where}: truncate {fields.data['truncate']!r} is not implemented (the yarn ramp rounds)")
    known = {*ROPE_KIND_KEYS, hf_key("mla.rope.theta").hf, "truncate", *_YARN_KEYS}
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
    intermediate, shared = text.field("moe.expert_intermediate_size"), text.field("moe.num_shared_experts")
    latent = text.field("moe.latent_size")
    method = text.text(TOPK_METHOD, default="noaux_tc")
    return {
        "num_experts": text.field("moe.num_experts"),
        "experts_per_token": text.field("moe.experts_per_token"),
        "expert_intermediate_size": intermediate,
        "num_shared_experts": shared,
        "shared_intermediate_size": intermediate * shared,
        "latent_size": latent,
        "latent_norm": text.field("moe.latent_norm") if latent else False,
        "router": {
            "activation": text.field("moe.router.activation"),
            "correction_bias": method == "noaux_tc",
            "renormalize": text.field("moe.router.renormalize"),
            "scaling_factor": float(text.field("moe.router.scaling_factor")),
            "num_groups": text.field("moe.router.num_groups"),
            "topk_groups": text.field("moe.router.topk_groups"),
        },
    }


def _naming(
    config: dict, text: _Fields, conventions: FamilyConventions, tensor_names: Container[str] | None, ffn: str
) -> dict:
    named = [data.get(name) for data in (text.data, config) for name in DTYPE_KEYS]
    dtype = next((d for d in named if d), "bfloat16")
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
    elif MLP_LAYER_TYPES in text.data:
        dense_block = "block_sparse_moe"
    if dense_block != "mlp":
        naming["dense_block"] = dense_block
    return naming


def _quantization(quant: dict, where: str) -> dict:
    q = _Fields(quant, f"{where}: {QUANTIZATION}")
    groups = q.get(QUANT_GROUPS)
    if not isinstance(groups, dict):
        raise InputError(f"{where}: {QUANTIZATION}.{QUANT_GROUPS} must be an object of groups, got {_shown(groups)}")
    if not groups:
        raise InputError(f"{where}: {QUANTIZATION}.{QUANT_GROUPS} is empty")
    weights = []
    for key, group in groups.items():
        field = f"{where}: {QUANTIZATION}.{QUANT_GROUPS}.{key}"
        group = _Fields(group, field)
        weights.append(_Fields(group.get(QUANT_WEIGHTS, default=None) or {}, f"{field}.{QUANT_WEIGHTS}"))
    sizes = {w.integer(QUANT_GROUP_SIZE, default=None) for w in weights}
    if len(sizes) != 1:
        raise InputError(f"{where}: {QUANTIZATION} groups disagree on {QUANT_GROUP_SIZE} {sorted(map(str, sizes))}")
    bits = {w.integer(QUANT_BITS, default=None) for w in weights}
    if bits != {4}:
        raise InputError(f"{where}: {QUANTIZATION} {QUANT_BITS} {sorted(map(str, bits))} is not supported (4)")
    ignore = q.get(QUANT_IGNORE, default=[])
    if not isinstance(ignore, list):
        raise InputError(f"{where}: {QUANTIZATION}.{QUANT_IGNORE} must be a list of names, got {_shown(ignore)}")
    return {
        "method": q.text(QUANT_METHOD),
        "format": q.text(QUANT_FORMAT),
        "group_size": sizes.pop(),
        "ignore": ignore,
    }


def _vision(top: _Fields) -> dict:
    """passthrough.vision from vision_config (top: the whole composite config)."""
    _Fields(top.data[VISION], f"{top.where}: {VISION}")  # an object, or refused as one
    prefix = "passthrough.vision."
    vision = {k.spec.removeprefix(prefix): top.field(k.spec) for k in hf_section(prefix)}
    merge, name = vision["merge_kernel_size"], f"{top.where}: {hf_key(prefix + 'merge_kernel_size').hf}"
    if not isinstance(merge, list) or len(merge) != 2:
        raise InputError(f"{name} must be a list of two integers, got {_shown(merge)}")
    vision["merge_kernel_size"] = [_integer(m, name) for m in merge]
    return vision


def _token_ids(config: dict, text: _Fields) -> dict:
    ids = {}
    for k in hf_section("token_ids."):
        value = config.get(k.hf, text.data.get(k.hf))
        if isinstance(value, list):  # transformers allows several eos ids; the first is the one generation stops on
            value = value[0] if value else None
        if value is not None:
            ids[k.spec.removeprefix("token_ids.")] = _integer(value, f"{text.where}: {k.hf}", MAX_TOKEN_ID, minimum=0)
    return ids
