"""The layer specs of a spec's hybrid pattern, as megatron-core ModuleSpecs: one per layer, chosen by the layer's
attention kind (KDA or MLA) and FFN kind (dense MLP or MoE), as megatron-core's
`get_transformer_block_with_experimental_attention_variant_spec` chooses GatedDeltaNet or self-attention per layer.

Every layer kind the spec's layout names must get a spec here; `block_spec` refuses a layout with a kind it has no
spec for, naming the layer.
"""

from __future__ import annotations

from dayone.adapters.megatron.kda import KDASubmodules, KimiDeltaAttention
from dayone.adapters.megatron.layer import HybridTransformerLayer
from dayone.adapters.megatron.mla import GatedMLASelfAttention, MLACoreAttention
from dayone.adapters.megatron.modules import GatedActivation, RMSNorm
from dayone.adapters.megatron.moe import GroupedExperts, LatentMoELayer, LatentMoESubmodules
from dayone.spec.schema import ModelSpec
from megatron.core.post_training.modelopt.layers import Linear
from megatron.core.tensor_parallel.layers import ColumnParallelLinear, RowParallelLinear
from megatron.core.transformer.enums import AttnMaskType
from megatron.core.transformer.mlp import MLP, MLPSubmodules
from megatron.core.transformer.moe.router import TopKRouter
from megatron.core.transformer.moe.shared_experts import SharedExpertMLP
from megatron.core.transformer.multi_latent_attention import MLASelfAttentionSubmodules
from megatron.core.transformer.spec_utils import ModuleSpec
from megatron.core.transformer.transformer_block import TransformerBlockSubmodules
from megatron.core.transformer.transformer_layer import TransformerLayerSubmodules


def activation_spec(spec: ModelSpec) -> ModuleSpec:
    act = spec.activation
    if act.kind == "situ":
        return ModuleSpec(module=GatedActivation, params={"kind": "situ", "beta": act.beta,
                                                           "linear_beta": act.linear_beta})  # fmt: skip
    return ModuleSpec(module=GatedActivation, params={"kind": "silu"})


def kda_spec(spec: ModelSpec) -> ModuleSpec:
    return ModuleSpec(
        module=KimiDeltaAttention,
        params={"kda": spec.kda},
        submodules=KDASubmodules(
            in_proj=ColumnParallelLinear, f_a_proj=Linear, f_b_proj=ColumnParallelLinear,
            beta_proj=ColumnParallelLinear, g_a_proj=Linear, g_b_proj=ColumnParallelLinear,
            out_norm=ModuleSpec(module=RMSNorm, params={"spec_eps": spec.kda.norm_eps}), out_proj=RowParallelLinear,
        ),
    )  # fmt: skip


def mla_spec(spec: ModelSpec) -> ModuleSpec:
    qk_norm = ModuleSpec(module=RMSNorm, params={"spec_eps": spec.mla.norm_eps})
    return ModuleSpec(
        module=GatedMLASelfAttention,
        params={"attn_mask_type": AttnMaskType.causal, "output_gate": spec.mla.output_gate, "nope": spec.mla.nope},
        submodules=MLASelfAttentionSubmodules(
            linear_q_proj=ColumnParallelLinear, linear_q_down_proj=Linear,
            linear_q_up_proj=ColumnParallelLinear, linear_kv_down_proj=Linear,
            linear_kv_up_proj=ColumnParallelLinear, core_attention=MLACoreAttention, linear_proj=RowParallelLinear,
            q_layernorm=qk_norm, kv_layernorm=qk_norm,
        ),
    )  # fmt: skip


def dense_spec(spec: ModelSpec) -> ModuleSpec:
    return ModuleSpec(
        module=MLP,
        submodules=MLPSubmodules(
            linear_fc1=ColumnParallelLinear, linear_fc2=RowParallelLinear, activation_func=activation_spec(spec)
        ),
    )


def moe_spec(spec: ModelSpec) -> ModuleSpec:
    moe = spec.moe
    shared = None
    if moe.num_shared_experts:
        shared = ModuleSpec(
            module=SharedExpertMLP,
            submodules=MLPSubmodules(
                linear_fc1=ColumnParallelLinear, linear_fc2=RowParallelLinear, activation_func=activation_spec(spec)
            ),
        )
    experts = ModuleSpec(module=GroupedExperts, params={"input_size": spec.moe_width,
                                                        "activation": activation_spec(spec)})  # fmt: skip
    norm = ModuleSpec(module=RMSNorm) if moe.latent_norm else None
    return ModuleSpec(
        module=LatentMoELayer,
        params={"latent_size": moe.latent_size, "latent_norm_eps": spec.norm_eps},
        submodules=LatentMoESubmodules(experts=experts, shared_experts=shared, router=TopKRouter, latent_norm=norm),
    )


ATTENTION_SPECS = {"kda": kda_spec, "mla": mla_spec}
FFN_SPECS = {"dense": dense_spec, "moe": moe_spec}


def block_spec(spec: ModelSpec, attention_specs=None, ffn_specs=None) -> TransformerBlockSubmodules:
    """One ModuleSpec per layer and the final norm, for megatron-core's TransformerBlock (GPTModel's decoder)."""
    attention_specs = ATTENTION_SPECS if attention_specs is None else attention_specs
    ffn_specs = FFN_SPECS if ffn_specs is None else ffn_specs
    residual_eps = spec.norm_eps if spec.residual.kind == "attention" else None
    norm = ModuleSpec(module=RMSNorm)
    built: dict[str, ModuleSpec] = {}
    layers = []
    for layer in spec.layers:
        for kind, table in ((layer.attention, attention_specs), (layer.ffn, ffn_specs)):
            if kind not in table:
                raise ValueError(f"layer {layer.index}: no Megatron layer spec for layer kind {kind!r}")
            if kind not in built:
                built[kind] = table[kind](spec)
        params = {"snapshot": layer.snapshot, "final": layer.index == spec.num_layers - 1,
                  "attention_residual_eps": residual_eps}  # fmt: skip
        submodules = TransformerLayerSubmodules(
            input_layernorm=norm, self_attention=built[layer.attention], pre_mlp_layernorm=norm, mlp=built[layer.ffn]
        )
        layers.append(ModuleSpec(module=HybridTransformerLayer, params=params, submodules=submodules))
    return TransformerBlockSubmodules(layer_specs=layers, layer_norm=norm)
