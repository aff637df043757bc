"""The HF config.json <-> ModelSpec mapping: one two-way table, read by derive.py and written by hf_config.py.

CONFIG_MAPPING pairs each config key that carries one spec field unchanged with that field, the way Megatron-Bridge's
bridges declare (hf_name, megatron_name) pairs once and map them in both directions. Paths are dotted: `hf` from the
text config (the whole config of a plain model, `text_config` of a composite one; `vision_config.*` from the top),
`spec` from the spec's root. A key's aliases are other names published configs use for the same field (transformers
5.x renames, flattened `linear_attn_config` members); readers accept any of them, which must agree, and writers
write `hf` only.

What is not one key for one field stays code in both directions, under the names in the second half of this file:
the layer layout (index lists, layer_types, first_k_dense_replace), the router's topk_method, the output gate's
kind, rope_scaling, quantization_config, the dtype and the head counts transformers wants for any stack.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from dayone.spec.bounds import MAX_DIM, MAX_INTERMEDIATE, MAX_LAYERS

REQUIRED: Any = ...  # a key without a default: a config that lacks it is refused, naming it


@dataclass(frozen=True)
class Key:
    """One config key and the spec field it carries.

    kind: the JSON type readers accept (int: not a bool or float; real: a finite number; flag: a boolean; text: a
        string; value: anything, checked by the code that reads it).
    default: what a config without the key means (REQUIRED: it must be there).
    limit: the largest int accepted before the spec is built (a count that sizes a table built from it).
    omit: values the writer leaves out because the default reads them back the same (None: the field is unset).
    """

    hf: str
    spec: str
    kind: Literal["int", "real", "flag", "text", "value"]
    aliases: tuple[str, ...] = ()
    default: Any = REQUIRED
    limit: int | None = None
    omit: tuple[Any, ...] = (None,)

    @property
    def names(self) -> tuple[str, ...]:
        return (self.hf, *self.aliases)


LINEAR = "linear_attn_config"  # the KDA block of a published config (its own keys, and the layer lists)
VISION = "vision_config"

CONFIG_MAPPING: tuple[Key, ...] = (
    Key("num_hidden_layers", "num_layers", "int", limit=MAX_LAYERS),
    Key("hidden_size", "hidden_size", "int", limit=MAX_DIM),
    Key("vocab_size", "vocab_size", "int"),
    Key("max_position_embeddings", "max_position_embeddings", "int", aliases=("model_max_length",)),
    Key("rms_norm_eps", "norm_eps", "real"),
    Key("tie_word_embeddings", "tie_word_embeddings", "flag", default=False),
    Key("hidden_act", "activation.kind", "text"),
    Key("activation_situ_beta", "activation.beta", "real"),
    Key("activation_situ_linear_beta", "activation.linear_beta", "real"),
    Key("attn_res_block_size", "residual.block_size", "int"),
    Key("intermediate_size", "dense_intermediate_size", "int"),
    # MLA (published configs write q_lora_rank: null for a model without the query down-projection)
    Key("num_attention_heads", "mla.num_heads", "int"),
    Key("q_lora_rank", "mla.q_lora_rank", "int", default=None, omit=()),
    Key("kv_lora_rank", "mla.kv_lora_rank", "int"),
    Key("qk_nope_head_dim", "mla.qk_nope_head_dim", "int"),
    Key("qk_rope_head_dim", "mla.qk_rope_head_dim", "int"),
    Key("v_head_dim", "mla.v_head_dim", "int"),
    Key("mla_use_nope", "mla.nope", "flag"),  # no default here: the family's conventions give it
    Key("mla_use_output_gate", "mla.output_gate", "flag", default=False, omit=(None, False)),
    Key("rope_theta", "mla.rope.theta", "real", aliases=("rope_parameters.rope_theta",)),
    Key("rope_interleave", "mla.rope.interleave", "flag", default=True),  # transformers' DeepSeek-V3 default
    # MoE
    Key("num_experts", "moe.num_experts", "int", aliases=("num_local_experts", "n_routed_experts")),
    Key("num_experts_per_token", "moe.experts_per_token", "int", aliases=("num_experts_per_tok",)),
    Key("num_shared_experts", "moe.num_shared_experts", "int", aliases=("n_shared_experts",), default=0),
    Key("moe_intermediate_size", "moe.expert_intermediate_size", "int", limit=MAX_INTERMEDIATE),
    Key("routed_expert_hidden_size", "moe.latent_size", "int", default=None),
    Key("latent_moe_use_norm", "moe.latent_norm", "flag", default=False, omit=(None, False)),
    Key("moe_router_activation_func", "moe.router.activation", "text", default="sigmoid"),
    Key("num_expert_group", "moe.router.num_groups", "int", aliases=("n_group",), default=1),
    Key("topk_group", "moe.router.topk_groups", "int", default=1),
    Key("moe_renormalize", "moe.router.renormalize", "flag", aliases=("norm_topk_prob",), default=True),
    Key("routed_scaling_factor", "moe.router.scaling_factor", "real", default=1.0),
    # KDA: published configs nest these in linear_attn_config; transformers 5.x flattens them
    Key(f"{LINEAR}.num_heads", "kda.num_heads", "int", aliases=("linear_num_heads",), limit=MAX_DIM),
    Key(f"{LINEAR}.head_dim", "kda.head_dim", "int", aliases=("linear_head_dim",), limit=MAX_DIM),
    Key(
        f"{LINEAR}.short_conv_kernel_size",
        "kda.conv_kernel_size",
        "int",
        aliases=("linear_conv_kernel_dim",),
        default=4,
    ),
    Key(f"{LINEAR}.gate_lower_bound", "kda.gate.lower_bound", "real", default=None),
    # token ids: at the top of a composite config (media_placeholder only there), in the text config of a plain one
    Key("bos_token_id", "token_ids.bos", "value", default=None),
    Key("eos_token_id", "token_ids.eos", "value", default=None),
    Key("pad_token_id", "token_ids.pad", "value", default=None),
    Key("media_placeholder_token_id", "token_ids.media_placeholder", "value", default=None),
    # the vision tower a composite config describes (passed through, never run)
    Key(f"{VISION}.patch_size", "passthrough.vision.patch_size", "int"),
    Key(f"{VISION}.vt_hidden_size", "passthrough.vision.hidden_size", "int"),
    Key(f"{VISION}.vt_intermediate_size", "passthrough.vision.intermediate_size", "int"),
    Key(f"{VISION}.vt_num_attention_heads", "passthrough.vision.num_heads", "int"),
    Key(f"{VISION}.vt_num_hidden_layers", "passthrough.vision.num_layers", "int"),
    Key(f"{VISION}.qkv_hidden_size", "passthrough.vision.qkv_hidden_size", "int"),
    Key(f"{VISION}.init_pos_emb_height", "passthrough.vision.pos_emb_height", "int"),
    Key(f"{VISION}.init_pos_emb_width", "passthrough.vision.pos_emb_width", "int"),
    Key(f"{VISION}.init_pos_emb_time", "passthrough.vision.pos_emb_time", "int"),
    Key(f"{VISION}.merge_kernel_size", "passthrough.vision.merge_kernel_size", "value"),
    Key(f"{VISION}.mm_hidden_size", "passthrough.vision.mm_hidden_size", "int"),
)
BY_SPEC = {key.spec: key for key in CONFIG_MAPPING}


def key(spec_path: str) -> Key:
    """The config key of a spec field ("mla.kv_lora_rank" -> kv_lora_rank)."""
    return BY_SPEC[spec_path]


def section(prefix: str) -> tuple[Key, ...]:
    """The keys of the spec fields under `prefix` ("token_ids." -> the four token id keys), in table order."""
    return tuple(k for k in CONFIG_MAPPING if k.spec.startswith(prefix))


def lookup(data: Any, path: str) -> tuple[bool, Any]:
    """(found, value) at a dotted path of nested dicts."""
    for part in path.split("."):
        if not isinstance(data, dict) or part not in data:
            return False, None
        data = data[part]
    return True, data


def place(config: dict, path: str, value: Any) -> None:
    """config[a][b] = value for the dotted path "a.b", creating the dicts on the way."""
    *parents, leaf = path.split(".")
    for part in parents:
        config = config.setdefault(part, {})
    config[leaf] = value


def written(spec_data: dict, keys: tuple[Key, ...] = CONFIG_MAPPING) -> list[tuple[str, Any]]:
    """(config path, value) for each key whose spec field `spec_data` (a dumped spec) holds and the key writes."""
    out = []
    for k in keys:
        found, value = lookup(spec_data, k.spec)
        if found and not any(value is o for o in k.omit):  # omit holds None and False: compared by identity
            out.append((k.hf, value))
    return out


# ----- keys the code handles (not one key for one field), named once here
DTYPE_KEYS = ("dtype", "torch_dtype")  # the checkpoint dtype; transformers 4.x wrote torch_dtype
ARCHITECTURES, MODEL_TYPE = "architectures", "model_type"
TEXT_CONFIG = "text_config"
KV_HEADS = "num_key_value_heads"  # MLA: equal to num_attention_heads
LAYER_LISTS = {"kda": "kda_layers", "mla": "full_attn_layers"}  # 1-based, in linear_attn_config
LAYER_TYPES = "layer_types"  # transformers 5.x: one attention kind per layer
LAYER_TYPE_KINDS = {"linear_attention": "kda", "full_attention": "mla"}
MLP_LAYER_TYPES = "mlp_layer_types"  # transformers 5.x: one FFN kind per layer
MLP_LAYER_NAMES = {"dense": "dense", "moe": "sparse"}  # the FFN kind -> what transformers 5.x writes
MLP_LAYER_KINDS = {name: kind for kind, name in MLP_LAYER_NAMES.items()} | {"moe": "moe"}  # read: "moe" too
FIRST_DENSE, MOE_FREQ = "first_k_dense_replace", "moe_layer_freq"
TOPK_METHOD, GROUPED_TOPK = "topk_method", "use_grouped_topk"  # noaux_tc: the router has a correction bias
FULL_RANK_GATE = "use_full_rank_gate"  # in linear_attn_config: the KDA output gate is full rank
ROPE_SCALING, ROPE_PARAMETERS = "rope_scaling", "rope_parameters"
ROPE_KIND_KEYS = ("type", "rope_type")  # rope_scaling's kind (yarn, default); transformers 5.x says rope_type
QUANTIZATION = "quantization_config"
# compressed-tensors' quantization_config: the keys the spec's quantization section is read from and written to
QUANT_METHOD, QUANT_FORMAT, QUANT_IGNORE = "quant_method", "format", "ignore"
QUANT_GROUPS, QUANT_WEIGHTS = "config_groups", "weights"  # each group's weight scheme
QUANT_BITS, QUANT_GROUP_SIZE = "num_bits", "group_size"
TEXT_HIDDEN_SIZE = "text_hidden_size"  # in vision_config: the text model's hidden size
