"""The MoE layer: megatron-core's MoELayer (router, token dispatcher, shared experts) with the latent projections
under megatron-core's names, the latent norm between combine and fc2_latent_proj, and experts named as
TransformerEngine's grouped linear names them.

    routed = fc2_latent_proj(routed_expert_norm(combine(experts(dispatch(fc1_latent_proj(x))))))  (+ shared(x))
megatron-core 0.16.1 builds fc1_latent_proj / fc2_latent_proj only with TransformerEngine (TELinear, duplicated over
tensor parallelism) and has no latent norm; `LatentMoELayer` builds the same projections from megatron-core's local
`Linear` (held whole by every rank, the same names and shapes) and adds the norm (`routed_expert_norm`, the name Miles' K3 converter uses).
`GroupedExperts` holds expert e's weights as `linear_fc1.weight{e}` / `linear_fc2.weight{e}` (e local to the
expert-parallel rank), as TEGroupedMLP does, and runs them one expert at a time with plain matmuls.
"""

from __future__ import annotations

import dataclasses

import torch
import torch.nn.functional as F
from megatron.core.post_training.modelopt.layers import Linear
from megatron.core.transformer.module import MegatronModule
from megatron.core.transformer.moe.moe_layer import MoELayer, MoESubmodules
from megatron.core.transformer.spec_utils import ModuleSpec, build_module
from megatron.core.transformer.transformer_config import TransformerConfig


class GroupedLinear(torch.nn.Module):
    """One weight per local expert, `weight{e}` [output_size, input_size]."""

    def __init__(self, num_experts: int, input_size: int, output_size: int, config: TransformerConfig, init_method):
        super().__init__()
        self.num_experts = num_experts
        for e in range(num_experts):
            weight = torch.nn.Parameter(torch.empty(output_size, input_size, dtype=config.params_dtype))
            if config.perform_initialization:
                init_method(weight.data)
            weight.allreduce = False  # expert weights are reduced over the expert data-parallel group only
            self.register_parameter(f"weight{e}", weight)

    def expert_weight(self, e: int) -> torch.Tensor:
        # not `weight`: Megatron-Bridge's mappings read `module.weight` as a tensor when a module has one (as
        # TransformerEngine's GroupedLinear, which holds only weight0..N, does not)
        return getattr(self, f"weight{e}")


class GroupedExperts(MegatronModule):
    """The local experts of a (latent) MoE: gated MLPs of width `input_size`, called as megatron-core calls its
    experts module: (tokens sorted by local expert, tokens per expert, their routing probabilities)."""

    def __init__(self, num_local_experts: int, config: TransformerConfig, input_size: int, activation: ModuleSpec,
                 pg_collection=None):  # fmt: skip
        super().__init__(config=config)
        inner = config.moe_ffn_hidden_size
        self.linear_fc1 = GroupedLinear(num_local_experts, input_size, 2 * inner, config, config.init_method)
        self.linear_fc2 = GroupedLinear(num_local_experts, inner, input_size, config, config.output_layer_init_method)
        self.activation_func = build_module(activation, config=config)

    def forward(self, tokens: torch.Tensor, tokens_per_expert: torch.Tensor, probs: torch.Tensor):
        """tokens [n, W] grouped by expert; tokens_per_expert [E_local]; probs [n] -> ([n, W], None)."""
        outputs = []
        for e, rows in enumerate(tokens.split(tokens_per_expert.tolist())):
            h = self.activation_func(F.linear(rows, self.linear_fc1.expert_weight(e)))
            outputs.append(F.linear(h, self.linear_fc2.expert_weight(e)))
        out = torch.cat(outputs) if outputs else tokens.new_zeros(0, tokens.shape[-1])
        # probabilities in fp32, as megatron-core's experts apply them before the combine sums the experts
        return (out.float() * probs.float()[:, None]).to(tokens.dtype), None


@dataclasses.dataclass
class LatentMoESubmodules(MoESubmodules):
    latent_norm: ModuleSpec | type | None = None


class LatentMoELayer(MoELayer):
    """MoELayer whose routed experts run in `latent_size` (None: a plain MoE layer), with an optional latent norm."""

    def __init__(self, config: TransformerConfig, submodules: LatentMoESubmodules, layer_number: int | None = None,
                 pg_collection=None, latent_size: int | None = None, latent_norm_eps: float | None = None):  # fmt: skip
        super().__init__(config, submodules, layer_number, pg_collection)
        self.latent_size = latent_size
        if latent_size is not None:
            D = config.hidden_size
            whole = {"config": config, "bias": False}
            self.fc1_latent_proj = Linear(D, latent_size, init_method=config.init_method, **whole)
            self.fc2_latent_proj = Linear(latent_size, D, init_method=config.output_layer_init_method, **whole)
            if submodules.latent_norm is not None:
                self.routed_expert_norm = build_module(
                    submodules.latent_norm, config=config, hidden_size=latent_size, eps=latent_norm_eps
                )

    def preprocess(self, hidden_states: torch.Tensor, probs: torch.Tensor, routing_map: torch.Tensor):
        if self.latent_size is not None:
            hidden_states, _ = self.fc1_latent_proj(hidden_states)
        return super().preprocess(hidden_states, probs, routing_map)

    def postprocess(self, output: torch.Tensor, shared_expert_output: torch.Tensor | None):
        output = self.token_dispatcher.combine_postprocess(output)
        if self.latent_size is not None:
            if hasattr(self, "routed_expert_norm"):
                output = self.routed_expert_norm(output)
            output, _ = self.fc2_latent_proj(output)
        if shared_expert_output is not None:
            output = output + shared_expert_output
        return output
