"""The spec language: one pydantic model per part of an architecture, YAML on disk, JSON schema for editors.

A ModelSpec describes field for field what the checkpoint holds and what the math is; everything else in dayone
(manifest, planner, model, kernels, adapters) reads it and nothing else. Checkpoint quirks (1-based layer lists,
A_log padding, MXFP4 pairs, name prefixes) are described here as data and translated at the loading boundary.
"""

from __future__ import annotations

import keyword
import math
import re
from dataclasses import dataclass
from functools import cached_property
from typing import Annotated, Literal

from dayone.core.errors import InputError
from dayone.core.vocabulary import DType
from dayone.spec.bounds import (
    MAX_DIM,
    MAX_EXPERT_INSTANCES,
    MAX_EXPERTS,
    MAX_HEADS,
    MAX_INTERMEDIATE,
    MAX_LAYERS,
    MAX_POSITIONS,
    MAX_SHARDS,
    MAX_SMALL,
    MAX_TOKEN_ID,
    MAX_VOCAB,
)
from dayone.spec.layout import from_index_lists, parse_expression
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StrictBool, StringConstraints, model_validator

# Every string that reaches generated code or package metadata matches one of these patterns, checked where it
# enters (a spec file or a derived config.json); the templates render them through `ident` / `py` as well.
IDENTIFIER_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]{0,99}$"  # a Python name: class names, attributes
MODULE_PREFIX_PATTERN = r"^(?:[A-Za-z_][A-Za-z0-9_]{0,99}\.){0,8}$"  # "model.", "language_model.model.", ""
TENSOR_NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]{0,99}(?:\.[A-Za-z0-9_]{1,100}){0,16}$"  # "language_model.lm_head.weight"
MODEL_TYPE_PATTERN = r"^[a-z][a-z0-9_]{0,63}$"  # transformers' model_type: "kimi_k3", "kimi_linear"
SPEC_NAME_PATTERN = r"^[a-z0-9][a-z0-9.\-]{0,63}$"  # file, package and distribution names derive from it
REPO_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._\-]{0,95}/[A-Za-z0-9][A-Za-z0-9._\-]{0,95}$"  # Hugging Face owner/name
# tensor roles, name prefixes and compressed-tensors ignore entries ("lm_head", "re:.*mlp.gate$"): no quotes or spaces
SELECTOR_PATTERN = r"^[A-Za-z0-9_.:*+?^$|()\[\]{},\-/\\]{1,200}$"


def is_identifier(text: object) -> bool:
    """A name that may be written raw into generated Python: the pattern above, and not a keyword."""
    return isinstance(text, str) and re.fullmatch(IDENTIFIER_PATTERN, text) is not None and not keyword.iskeyword(text)


def _not_keyword(text: str) -> str:
    if keyword.iskeyword(text):
        raise ValueError(f"{text!r} is a Python keyword")
    return text


def Count(limit: int, *, minimum: int = 1, **field):
    """An integer field: an int in the config (never "93" or 93.0 or true), from `minimum` up to `limit`."""
    return Field(strict=True, ge=minimum, le=limit, **field)


def Real(**field):
    """A float field: a finite number in the config, never a string."""
    return Field(strict=True, allow_inf_nan=False, **field)


SmallInt = Annotated[int, Count(MAX_SMALL)]
LayerNumber = Annotated[int, Count(MAX_LAYERS)]
Identifier = Annotated[str, StringConstraints(pattern=IDENTIFIER_PATTERN), AfterValidator(_not_keyword)]
ModuleName = Annotated[str, StringConstraints(pattern=MODULE_PREFIX_PATTERN)]
TensorName = Annotated[str, StringConstraints(pattern=TENSOR_NAME_PATTERN)]
ModelType = Annotated[str, StringConstraints(pattern=MODEL_TYPE_PATTERN)]
RepoId = Annotated[str, StringConstraints(pattern=REPO_ID_PATTERN)]
Selector = Annotated[str, StringConstraints(pattern=SELECTOR_PATTERN)]

AttentionKind = Literal["kda", "mla"]
FFNKind = Literal["dense", "moe"]


class Strict(BaseModel):
    """Unknown keys are errors: a typo in a spec must not silently become a default."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class KDAGate(Strict):
    """The per-channel log-decay. plain: -exp(A_log) * softplus(g + dt_bias);
    safe: lower_bound * sigmoid(exp(A_log) * (g + dt_bias)), which keeps the decay inside (lower_bound, 0)."""

    kind: Literal["plain", "safe"]
    lower_bound: float | None = Real(default=None)
    rank: int = Count(MAX_DIM, description="width of f_a_proj, the low-rank factor of the raw gate")

    @model_validator(mode="after")
    def _bound_matches_kind(self) -> KDAGate:
        if self.kind == "safe" and (self.lower_bound is None or self.lower_bound >= 0):
            raise ValueError("a safe gate needs a negative lower_bound")
        if self.kind == "plain" and self.lower_bound is not None:
            raise ValueError("a plain gate has no lower_bound")
        return self


class KDAOutputGate(Strict):
    """sigmoid(gate(x)) multiplies the normed output: low_rank is g_b_proj(g_a_proj(x)), full_rank is g_proj(x)."""

    kind: Literal["low_rank", "full_rank"]
    rank: int | None = Count(MAX_DIM, default=None)

    @model_validator(mode="after")
    def _rank_matches_kind(self) -> KDAOutputGate:
        if (self.kind == "low_rank") != (self.rank is not None):
            raise ValueError("rank is required for a low_rank output gate and forbidden for full_rank")
        return self


class KDASpec(Strict):
    """Kimi Delta Attention: gated delta rule with per-channel decay, short convs on q/k/v, gated RMSNorm out."""

    num_heads: int = Count(MAX_HEADS)
    head_dim: int = Count(MAX_DIM)
    conv_kernel_size: int = Count(MAX_SMALL)
    gate: KDAGate
    output_gate: KDAOutputGate
    a_log_shape: tuple[Annotated[int, Count(MAX_DIM)], ...] = Field(
        min_length=1, max_length=8, description="A_log as stored; entries past num_heads are padding and must be 0"
    )
    norm_eps: float = Real(gt=0, lt=1, description="eps of the per-head o_norm")

    @model_validator(mode="after")
    def _a_log_holds_every_head(self) -> KDASpec:
        size = 1
        for d in self.a_log_shape:
            size *= d
        if size < self.num_heads:
            raise ValueError(f"a_log_shape {list(self.a_log_shape)} holds {size} values, fewer than num_heads")
        return self

    @property
    def a_log_padding(self) -> int:
        size = 1
        for d in self.a_log_shape:
            size *= d
        return size - self.num_heads


class RopeScaling(Strict):
    """YaRN context extension, the fields DeepSeek-V3's config.json writes in rope_scaling. Frequencies of the dims
    that turn fewer than beta_slow times over original_max_position_embeddings are divided by factor, those turning
    more than beta_fast times kept, a linear ramp between; with m(s, k) = 0.1 k ln s + 1 (1 for s <= 1), cos and sin
    are multiplied by m(factor, mscale) / m(factor, mscale_all_dim) and the softmax scale by m(factor,
    mscale_all_dim)^2."""

    kind: Literal["yarn"] = Field(description="rope_scaling.type (or rope_type); only yarn is implemented")
    factor: float = Real(ge=1)
    original_max_position_embeddings: int = Count(MAX_POSITIONS)
    beta_fast: float = Real(default=32.0, gt=0)
    beta_slow: float = Real(default=1.0, gt=0)
    mscale: float = Real(default=1.0, ge=0)
    mscale_all_dim: float = Real(default=0.0, ge=0)

    @model_validator(mode="after")
    def _ramp_is_ordered(self) -> RopeScaling:
        if self.beta_fast < self.beta_slow:
            raise ValueError(f"beta_fast {self.beta_fast} is below beta_slow {self.beta_slow}")
        return self

    @property
    def amplitude(self) -> float:
        """The factor on cos and sin."""
        return yarn_mscale(self.factor, self.mscale) / yarn_mscale(self.factor, self.mscale_all_dim)

    @property
    def softmax_factor(self) -> float:
        """The factor on the softmax scale."""
        return yarn_mscale(self.factor, self.mscale_all_dim) ** 2


def yarn_mscale(scale: float, k: float) -> float:
    """YaRN's m(s, k) = 0.1 k ln s + 1, and 1 for s <= 1."""
    return 1.0 if scale <= 1 else 0.1 * k * math.log(scale) + 1.0


class Rope(Strict):
    """Rotary position embedding of MLA's qk_rope dims (q's per head, the shared k_pe), DeepSeek-V3's convention."""

    theta: float = Real(gt=0, description="rope_theta: the base of the rotary frequencies")
    interleave: StrictBool = Field(
        default=True, description="rotate adjacent pairs (x0, x1), (x2, x3), ... (DeepSeek-V3); false: halves"
    )
    scaling: RopeScaling | None = None


class MLASpec(Strict):
    """Multi-head latent attention. With nope=True the 'rope' dims are used unrotated (no positional encoding);
    with nope=False they are rotated as `rope` says."""

    num_heads: int = Count(MAX_HEADS)
    q_lora_rank: int | None = Count(MAX_DIM, default=None)
    kv_lora_rank: int = Count(MAX_DIM)
    qk_nope_head_dim: int = Count(MAX_DIM)
    qk_rope_head_dim: int = Count(MAX_DIM)
    v_head_dim: int = Count(MAX_DIM)
    nope: StrictBool = True
    rope: Rope | None = None
    output_gate: StrictBool = False
    norm_eps: float = Real(gt=0, lt=1, description="eps of q_a_layernorm and kv_a_layernorm")

    @model_validator(mode="after")
    def _rope_matches_nope(self) -> MLASpec:
        if self.nope and self.rope is not None:
            raise ValueError("rope is given but nope is true (the rope dims are never rotated): drop one")
        if not self.nope and self.rope is None:
            raise ValueError("nope is false: rope (theta, and scaling if any) is required")
        if not self.nope and self.qk_rope_head_dim % 2:
            raise ValueError(f"qk_rope_head_dim {self.qk_rope_head_dim} must be even to be rotated in pairs")
        return self

    @property
    def qk_head_dim(self) -> int:
        return self.qk_nope_head_dim + self.qk_rope_head_dim

    @property
    def softmax_scale(self) -> float:
        """qk_head_dim^-0.5, times YaRN's factor when the rope is scaled."""
        scaling = self.rope.scaling if self.rope is not None else None
        return self.qk_head_dim**-0.5 * (scaling.softmax_factor if scaling is not None else 1.0)


class Activation(Strict):
    """silu: silu(gate) * up. situ: beta*tanh(gate/beta)*sigmoid(gate) * linear_beta*tanh(up/linear_beta)."""

    kind: Literal["silu", "situ"]
    beta: float | None = Real(default=None, gt=0)
    linear_beta: float | None = Real(default=None, gt=0)

    @model_validator(mode="after")
    def _betas_match_kind(self) -> Activation:
        if self.kind == "situ" and (self.beta is None or self.linear_beta is None):
            raise ValueError("situ needs beta and linear_beta")
        if self.kind == "silu" and (self.beta is not None or self.linear_beta is not None):
            raise ValueError("silu takes no betas")
        return self


class RouterSpec(Strict):
    """Sigmoid (or softmax) scores; top-k chosen on score + correction bias; weights from the unbiased scores."""

    activation: Literal["sigmoid", "softmax"]
    correction_bias: StrictBool
    renormalize: StrictBool
    scaling_factor: float = Real()
    num_groups: int = Count(MAX_EXPERTS)
    topk_groups: int = Count(MAX_EXPERTS)


class MoESpec(Strict):
    num_experts: int = Count(MAX_EXPERTS)
    experts_per_token: int = Count(MAX_EXPERTS)
    expert_intermediate_size: int = Count(MAX_INTERMEDIATE)
    num_shared_experts: int = Count(MAX_SMALL, minimum=0)
    shared_intermediate_size: int = Count(
        MAX_INTERMEDIATE, minimum=0, description="total width of the shared experts, fused"
    )
    latent_size: int | None = Count(MAX_DIM, default=None, description="routed experts run in this width (latent MoE)")
    latent_norm: StrictBool = False
    router: RouterSpec

    @model_validator(mode="after")
    def _consistent(self) -> MoESpec:
        if self.experts_per_token > self.num_experts:
            raise ValueError("experts_per_token exceeds num_experts")
        if self.latent_norm and self.latent_size is None:
            raise ValueError("latent_norm needs latent_size")
        if (self.num_shared_experts == 0) != (self.shared_intermediate_size == 0):
            raise ValueError("shared_intermediate_size must be 0 exactly when there are no shared experts")
        return self


class ResidualSpec(Strict):
    """plain: x + sublayer(x). attention: attention residuals over a bank of block snapshots (block_size layers)."""

    kind: Literal["plain", "attention"]
    block_size: int | None = Count(MAX_LAYERS, default=None)

    @model_validator(mode="after")
    def _block_matches_kind(self) -> ResidualSpec:
        if (self.kind == "attention") != (self.block_size is not None):
            raise ValueError("block_size is required for attention residuals and forbidden for plain")
        return self


class ExpertNames(Strict):
    gate: Identifier = "w1"
    up: Identifier = "w3"
    down: Identifier = "w2"


class CheckpointNaming(Strict):
    """Where tensors live in the checkpoint and how they are stored."""

    prefix: ModuleName = Field(
        description="prefix of the language model's tensors, e.g. 'model.' or 'language_model.model.'"
    )
    lm_head: TensorName = Field(description="full name of the output head tensor")
    moe_block: Identifier = "block_sparse_moe"
    dense_block: Identifier = Field(default="mlp", description="module name of the dense layers' MLP")
    experts: ExpertNames = ExpertNames()
    dtype: DType = "bfloat16"
    float32: tuple[Selector, ...] = Field(
        default=(), description="roles stored in float32 whatever the checkpoint dtype (see manifest roles)"
    )


class QuantizationSpec(Strict):
    """compressed-tensors MXFP4 on the routed experts: weight_packed U8 [out, in/2] + weight_scale U8 [out, in/32]."""

    method: Literal["compressed-tensors"]
    format: Literal["mxfp4-pack-quantized"]
    num_bits: Literal[4] = 4
    group_size: int = Count(MAX_SMALL)
    scale_dtype: Literal["uint8"] = "uint8"
    ignore: tuple[Selector, ...] = ()


class VisionTower(Strict):
    """MoonViT dims: enough to name and size the tensors an integration passes through untouched."""

    num_layers: int = Count(MAX_LAYERS)
    hidden_size: int = Count(MAX_DIM)
    intermediate_size: int = Count(MAX_INTERMEDIATE)
    qkv_hidden_size: int = Count(MAX_INTERMEDIATE)
    num_heads: int = Count(MAX_HEADS)
    patch_size: int = Count(MAX_SMALL)
    pos_emb_height: int = Count(MAX_DIM)
    pos_emb_width: int = Count(MAX_DIM)
    pos_emb_time: int = Count(MAX_DIM)
    merge_kernel_size: tuple[SmallInt, SmallInt]
    mm_hidden_size: int = Count(MAX_INTERMEDIATE)


class Passthrough(Strict):
    """Tensors a text-only integration keeps as-is (vision tower, projector), under these prefixes."""

    prefixes: tuple[Selector, ...]
    vision: VisionTower | None = None


class TokenIds(Strict):
    bos: int | None = Count(MAX_TOKEN_ID, minimum=0, default=None)
    eos: int | None = Count(MAX_TOKEN_ID, minimum=0, default=None)
    pad: int | None = Count(MAX_TOKEN_ID, minimum=0, default=None)
    media_placeholder: int | None = Count(MAX_TOKEN_ID, minimum=0, default=None)


class HFIdentity(Strict):
    """How Hugging Face names this model: the top-level architecture and model_type, and the text model's."""

    architecture: Identifier
    model_type: ModelType
    text_model_type: ModelType | None = None  # set for composite (multimodal) configs with a text_config
    text_architecture: Identifier | None = None


class Layout(Strict):
    """Per-layer kinds, as an expression ("23 x [kda kda kda mla] + [mla]") or 1-based lists ({kda: [...], mla: [...]})."""

    attention: (
        Annotated[str, Field(max_length=4096)]
        | dict[AttentionKind, Annotated[list[LayerNumber], Field(max_length=MAX_LAYERS)]]
    )
    ffn: (
        Annotated[str, Field(max_length=4096)]
        | dict[FFNKind, Annotated[list[LayerNumber], Field(max_length=MAX_LAYERS)]]
    )


class Conventions(Strict):
    """What a model type's releases store that config.json does not say: spec/conventions/<model_type>.yaml, a
    folder given with --conventions or $DAYONE_CONVENTIONS, or a spec's own `conventions` block.

    A conventions file either states every field or `extends` another model type's conventions and states only what
    differs: a field left out (or null) is inherited."""

    extends: ModelType | None = Field(default=None, description="model type whose conventions this one starts from")
    architecture: Identifier | None = Field(
        default=None, description="top-level class name, used when config.json lists no architectures"
    )
    text_config: StrictBool | None = Field(
        default=None, description="the language model's fields are nested in text_config (a composite config)"
    )
    prefix: ModuleName | None = Field(default=None, description="prefix of the language model's tensors")
    lm_head: TensorName | None = Field(default=None, description="full name of the output head tensor")
    float32: tuple[Selector, ...] | None = Field(
        default=None, max_length=64, description="roles stored in float32 when the checkpoint dtype is lower"
    )
    a_log_layout: Literal["flat", "per_head"] | None = Field(
        default=None, description="A_log stored as [N] (flat, N padded: a_log_pad_to) or as [1, 1, num_heads, 1]"
    )
    a_log_pad_to: int | None = Count(
        MAX_DIM, default=None, description="flat A_log: heads zero-padded to a multiple of this (1: no padding)"
    )
    passthrough: tuple[Selector, ...] | None = Field(
        default=None, max_length=64, description="prefixes of tensors kept as they are (vision tower, projector)"
    )
    mla_norm_eps: Annotated[float, Real(gt=0, lt=1)] | Literal["rms_norm_eps"] | None = Field(
        default=None, description="eps of the q_a/kv_a layernorms: a number, or rms_norm_eps to take the config's"
    )
    mla_use_nope: StrictBool | None = Field(
        default=None,
        description="what a config.json without mla_use_nope means: true NoPE (Kimi), false rotary MLA (DeepSeek-V3)",
    )


class Release(Strict):
    """Facts of a published checkpoint that are not architecture: its repo and shard count."""

    repo: RepoId | None = None
    num_shards: int | None = Count(MAX_SHARDS, default=None)


@dataclass(frozen=True)
class Layer:
    """One row of the layer table. snapshot: attention residuals append the prefix to the bank at this layer."""

    index: int
    attention: AttentionKind
    ffn: FFNKind
    snapshot: bool


class ModelSpec(Strict):
    """A whole architecture. See spec/models/*.yaml for the shipped ones."""

    name: str = Field(pattern=SPEC_NAME_PATTERN)
    hf: HFIdentity
    num_layers: int = Count(MAX_LAYERS)
    hidden_size: int = Count(MAX_DIM)
    vocab_size: int = Count(MAX_VOCAB)
    max_position_embeddings: int = Count(MAX_POSITIONS)
    norm_eps: float = Real(gt=0, lt=1)
    tie_word_embeddings: StrictBool = False
    layout: Layout
    activation: Activation
    residual: ResidualSpec
    kda: KDASpec | None = None
    mla: MLASpec | None = None
    dense_intermediate_size: int | None = Count(MAX_INTERMEDIATE, default=None)
    moe: MoESpec | None = None
    checkpoint: CheckpointNaming
    quantization: QuantizationSpec | None = None
    passthrough: Passthrough | None = None
    token_ids: TokenIds = TokenIds()
    release: Release = Release()
    conventions: Conventions | None = Field(
        default=None, description="family conventions for a model type without a conventions file (see Conventions)"
    )

    @model_validator(mode="after")
    def _parts_match_layout(self) -> ModelSpec:
        if self.moe is not None and self.num_layers * self.moe.num_experts > MAX_EXPERT_INSTANCES:
            raise ValueError(
                f"num_layers x moe.num_experts = {self.num_layers * self.moe.num_experts} exceeds {MAX_EXPERT_INSTANCES}"
            )
        attention, ffn = self.attention_kinds, self.ffn_kinds
        for name, kinds in (("layout.attention", attention), ("layout.ffn", ffn)):
            if len(kinds) != self.num_layers:
                raise ValueError(f"{name} gives {len(kinds)} layers but num_layers is {self.num_layers}")
        if "kda" in attention and self.kda is None:
            raise ValueError("the layout has kda layers but the spec has no kda section")
        if "mla" in attention and self.mla is None:
            raise ValueError("the layout has mla layers but the spec has no mla section")
        if "moe" in ffn and self.moe is None:
            raise ValueError("the layout has moe layers but the spec has no moe section")
        if "dense" in ffn and self.dense_intermediate_size is None:
            raise ValueError("the layout has dense layers but dense_intermediate_size is not set")
        if self.quantization is not None and self.moe is None:
            raise ValueError("quantization of routed experts needs a moe section")
        if self.quantization is not None and "moe" not in ffn:  # config.json would carry no experts to quantize
            raise ValueError("quantization: the layout has no moe layer, so no routed experts to quantize")
        return self

    @cached_property
    def attention_kinds(self) -> tuple[str, ...]:
        return _expand(self.layout.attention, ("kda", "mla"), self.num_layers, "layout.attention")

    @cached_property
    def ffn_kinds(self) -> tuple[str, ...]:
        return _expand(self.layout.ffn, ("dense", "moe"), self.num_layers, "layout.ffn")

    @cached_property
    def layers(self) -> tuple[Layer, ...]:
        """The layer table, 0-based."""
        block = self.residual.block_size
        return tuple(
            Layer(i, self.attention_kinds[i], self.ffn_kinds[i], block is not None and i % block == 0)  # type: ignore[arg-type]
            for i in range(self.num_layers)
        )

    @property
    def moe_width(self) -> int:
        """The width routed experts see: the latent size of a latent MoE, else the hidden size."""
        assert self.moe is not None
        return self.moe.latent_size or self.hidden_size


def _expand(value: str | dict, allowed: tuple[str, ...], num_layers: int, field: str) -> tuple[str, ...]:
    # Raised as ValueError so that pydantic reports it and the message names the spec file like any other error.
    try:
        if isinstance(value, str):
            return parse_expression(value, allowed, field)
        return from_index_lists(dict(value), num_layers, field)
    except InputError as err:
        raise ValueError(str(err)) from None
