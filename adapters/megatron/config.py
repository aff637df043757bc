"""The megatron-core config of a spec: an MLATransformerConfig with the spec's sizes, MoE and parallel settings.

`model_fields(spec)` are the TransformerConfig fields the spec decides (one truth for this model, the Megatron-Bridge
provider and Miles' arguments); `transformer_config` adds the run's parallel sizes and dtype and builds the config.
What megatron-core has no field for (KDA, attention residuals, SiTU, the latent norm) travels in the layer specs'
params (`layer_specs.py`), read from the spec. Importing this module does not import megatron-core.
"""

from __future__ import annotations

import torch
from dayone.adapters.megatron.refusals import rope_refusals, router_refusals
from dayone.core.errors import InputError
from dayone.spec.schema import ModelSpec


def transformer_config(
    spec: ModelSpec,
    tensor_parallel: int = 1,
    expert_parallel: int = 1,
    dtype: torch.dtype = torch.float32,
    cpu: bool | None = None,
    sequence_parallel: bool = False,
):
    """The MLATransformerConfig of one run. cpu: initialise weights on the CPU (default: when no GPU is present)."""
    import torch.nn.functional as F
    from megatron.core.transformer.transformer_config import MLATransformerConfig

    cpu = not torch.cuda.is_available() if cpu is None else cpu
    fields = model_fields(spec) | {
        # The gated activation (SiTU or SiLU-and-mul) is a module of the MLP specs; megatron-core calls such a module
        # with the whole [gate | up] output when use_te_activation_func is set (the name is historical).
        "activation_func": F.silu,
        "use_te_activation_func": True,
        "tensor_model_parallel_size": tensor_parallel,
        "expert_model_parallel_size": expert_parallel,
        "params_dtype": dtype,
        "bf16": dtype == torch.bfloat16,
        "use_cpu_initialization": cpu,
        "sequence_parallel": sequence_parallel,
    }
    if spec.moe is not None:
        # alltoall (Miles' choice) creates a CUDA stream when built; allgather runs on a CPU
        fields["moe_token_dispatcher_type"] = "allgather" if cpu else "alltoall"
    return MLATransformerConfig(**fields)


def model_fields(spec: ModelSpec) -> dict:
    """TransformerConfig / MLATransformerConfig fields of the spec's model (no run settings)."""
    mla = spec.mla
    moe = spec.moe
    kwargs: dict = {
        "num_layers": spec.num_layers,
        "hidden_size": spec.hidden_size,
        "num_attention_heads": mla.num_heads if mla else spec.kda.num_heads,
        "ffn_hidden_size": spec.dense_intermediate_size or spec.hidden_size,
        "normalization": "RMSNorm",
        "layernorm_epsilon": spec.norm_eps,
        "add_bias_linear": False,
        "gated_linear_unit": True,
        "bias_activation_fusion": False,
        "masked_softmax_fusion": False,
        "bias_dropout_fusion": False,
        "apply_rope_fusion": False,
        "persist_layer_norm": False,
        "gradient_accumulation_fusion": False,
        "hidden_dropout": 0.0,
        "attention_dropout": 0.0,
        "expert_tensor_parallel_size": 1,  # experts are spread by expert parallelism, never split (weight map)
        "transformer_impl": "local",
    }
    if mla is not None:
        kwargs |= {
            "multi_latent_attention": True,
            "q_lora_rank": mla.q_lora_rank,
            "kv_lora_rank": mla.kv_lora_rank,
            "qk_head_dim": mla.qk_nope_head_dim,
            "qk_pos_emb_head_dim": mla.qk_rope_head_dim,
            "v_head_dim": mla.v_head_dim,
            "kv_channels": mla.v_head_dim,
            # MLA's q/kv norms are built by the layer spec whatever this says; True would make megatron-core's
            # finalize_model_grads sum the q_layernorm grads over TP ranks (meant for per-head QK norms), which for
            # MLA's latent norm (identical on every rank) multiplies them by TP
            "qk_layernorm": False,
        } | rope_fields(spec)
    if moe is not None:
        router = moe.router
        refused = router_refusals(spec)
        if refused:
            raise NoMegatronForm(refused[0])
        kwargs |= {
            # softmax: top-k of the logits then softmax (renormalised), or softmax then top-k (pre_softmax)
            "moe_router_pre_softmax": router.activation == "softmax" and not router.renormalize,
            "num_moe_experts": moe.num_experts,
            "moe_router_topk": moe.experts_per_token,
            "moe_ffn_hidden_size": moe.expert_intermediate_size,
            "moe_shared_expert_intermediate_size": moe.shared_intermediate_size or None,
            "moe_layer_freq": [1 if f == "moe" else 0 for f in spec.ffn_kinds],
            "moe_router_score_function": moe.router.activation,
            "moe_router_enable_expert_bias": moe.router.correction_bias,
            "moe_router_bias_update_rate": 0.0,
            "moe_router_topk_scaling_factor": moe.router.scaling_factor,
            "moe_router_num_groups": moe.router.num_groups if moe.router.num_groups > 1 else None,
            "moe_router_group_topk": moe.router.topk_groups if moe.router.num_groups > 1 else None,
            "moe_router_dtype": "fp32",
            "moe_router_load_balancing_type": "none",
            "moe_aux_loss_coeff": 0.0,
            "moe_grouped_gemm": False,
            "moe_permute_fusion": False,
            # The latent projections are modules of our MoE layer (megatron-core builds them only with
            # TransformerEngine); the latent width reaches the experts through the layer spec.
            "moe_latent_size": None,
        }
    return kwargs


class NoMegatronForm(InputError, ValueError):
    """A spec field megatron-core cannot express: one line naming it (exit 2 from the CLI, before anything is
    written; a ValueError too, for callers of `model_fields` that predate the InputError)."""


def rope_fields(spec: ModelSpec) -> dict:
    """MLATransformerConfig's rotary fields. NoPE: plain rope, which mla.py replaces by zero angles. Rope: megatron-core
    rotates MLA's rope dims as DeepSeek-V3 stores them (adjacent pairs, de-interleaved before turning), "rope" or
    "yarn" with the spec's YaRN parameters (its cos/sin amplitude and softmax mscale are the spec's formulas)."""
    rope = spec.mla.rope
    if rope is None:
        return {"rope_type": "rope", "rotary_scaling_factor": 1.0, "mscale": 1.0, "mscale_all_dim": 0.0}
    refused = rope_refusals(spec)
    if refused:
        raise NoMegatronForm(refused[0])
    fields = {"rotary_base": rope.theta, "rotary_percent": 1.0}
    s = rope.scaling
    if s is None:
        return fields | {"rope_type": "rope", "rotary_scaling_factor": 1.0, "mscale": 1.0, "mscale_all_dim": 0.0}
    return fields | {
        "rope_type": "yarn",
        "rotary_scaling_factor": s.factor,
        "original_max_position_embeddings": s.original_max_position_embeddings,
        "beta_fast": s.beta_fast,
        "beta_slow": s.beta_slow,
        "mscale": s.mscale,
        "mscale_all_dim": s.mscale_all_dim,
    }


# Fields a config made from Megatron arguments (Miles) or a provider (Megatron-Bridge) must agree on with the spec.
CHECKED = (
    "num_layers", "hidden_size", "num_attention_heads", "ffn_hidden_size", "q_lora_rank", "kv_lora_rank",
    "qk_head_dim", "qk_pos_emb_head_dim", "v_head_dim", "num_moe_experts", "moe_ffn_hidden_size", "moe_router_topk",
    "moe_layer_freq", "moe_shared_expert_intermediate_size", "moe_router_score_function",
)  # fmt: skip


def configure(config, spec: ModelSpec) -> None:
    """Check `config` (built by Miles from arguments, or a Bridge provider) against the spec, naming the first field
    that differs; then set what no argument names: the gated activation module hook, no megatron-core latent
    projections (the layer spec builds them, TransformerEngine-free) and MLA's rotary fields (`rope_fields`)."""
    import torch.nn.functional as F

    fields = model_fields(spec)
    for name in CHECKED:
        if name in fields and getattr(config, name, None) != fields[name]:
            flag = name.replace("_", "-")
            raise ValueError(
                f"spec {spec.name}: {name} (--{flag}) is {getattr(config, name, None)!r}, the spec says {fields[name]!r}"
            )
    freq = getattr(config, "linear_attention_freq", None)
    kinds = [1 if a == "kda" else 0 for a in spec.attention_kinds]
    if freq is not None and list(freq) != kinds:
        raise ValueError(f"spec {spec.name}: linear_attention_freq is {freq!r}, the spec's layout is {kinds}")
    config.activation_func = F.silu
    config.use_te_activation_func = True
    config.bias_activation_fusion = False
    config.moe_latent_size = None
    if spec.mla is not None:
        for name, value in rope_fields(spec).items():
            setattr(config, name, value)
