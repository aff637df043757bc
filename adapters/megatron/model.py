"""The decoder block and the language model: megatron-core's embedding and vocab-parallel output layer around the
spec's layers (`layer_specs.py`), with the final attention-residual mix where the spec has attention residuals.

    model = build_model(spec)       # parallel_state initialised; names = the weight map's megatron layout
    logits = model(input_ids)       # [b, s] -> [b, s, vocab / TP]
"""

from __future__ import annotations

import torch
from dayone.adapters.megatron.config import transformer_config
from dayone.adapters.megatron.layer import AttentionResidual, ResidualStream
from dayone.adapters.megatron.layer_specs import block_spec
from dayone.adapters.megatron.modules import RMSNorm
from dayone.spec.schema import ModelSpec
from megatron.core.models.common.embeddings.language_model_embedding import LanguageModelEmbedding
from megatron.core.models.common.language_module.language_module import LanguageModule
from megatron.core.tensor_parallel.layers import ColumnParallelLinear
from megatron.core.transformer.module import MegatronModule
from megatron.core.transformer.spec_utils import ModuleSpec, build_module
from megatron.core.transformer.transformer_config import TransformerConfig


class HybridBlock(MegatronModule):
    """decoder.layers.{i}, decoder.final_attn_res (attention residuals), decoder.final_layernorm."""

    def __init__(self, config: TransformerConfig, layers: list[ModuleSpec], attention_residual_eps: float | None):
        super().__init__(config=config)
        self.layers = torch.nn.ModuleList(
            build_module(layer, config=config, layer_number=i + 1) for i, layer in enumerate(layers)
        )
        if attention_residual_eps is not None:
            self.final_attn_res = AttentionResidual(config, attention_residual_eps)
        self.final_layernorm = RMSNorm(config, config.hidden_size, config.layernorm_epsilon)

    def forward(self, hidden_states: torch.Tensor, attention_mask=None, packed_seq_params=None) -> torch.Tensor:
        stream = ResidualStream(hidden_states)
        for layer in self.layers:
            stream = layer(stream, attention_mask=attention_mask, packed_seq_params=packed_seq_params)
        if hasattr(self, "final_attn_res"):
            return self.final_attn_res(stream, self.final_layernorm.weight)
        return self.final_layernorm(stream.prefix)


class HybridGPTModel(LanguageModule):
    """embedding.word_embeddings, decoder (HybridBlock), output_layer (vocab-parallel), as GPTModel names them."""

    def __init__(self, config: TransformerConfig, spec: ModelSpec, parallel_output: bool = True) -> None:
        super().__init__(config=config)
        layers, residual_eps = block_spec(spec)
        self.vocab_size = spec.vocab_size
        self.share_embeddings_and_output_weights = spec.tie_word_embeddings
        self.parallel_output = parallel_output
        self.pre_process = self.post_process = True
        self.embedding = LanguageModelEmbedding(
            config, spec.vocab_size, spec.max_position_embeddings, position_embedding_type="none",
            tp_group=self.pg_collection.tp,
        )  # fmt: skip
        self.decoder = HybridBlock(config, layers, residual_eps)
        self.output_layer = ColumnParallelLinear(
            config.hidden_size, spec.vocab_size, config=config, init_method=config.init_method, bias=False,
            gather_output=not parallel_output, skip_weight_param_allocation=spec.tie_word_embeddings,
            tp_group=self.pg_collection.tp,
        )  # fmt: skip
        if spec.tie_word_embeddings:
            self.setup_embeddings_and_output_layer()

    def set_input_tensor(self, input_tensor) -> None:  # pipeline parallelism is not supported: one stage
        pass

    def forward(self, input_ids: torch.Tensor, position_ids=None, attention_mask=None, labels=None):
        """input_ids [b, s] -> logits [b, s, vocab / TP] (or the per-token loss [b, s] given labels)."""
        h = self.embedding(input_ids=input_ids, position_ids=position_ids)
        h = self.decoder(h, attention_mask=attention_mask)
        weight = self.shared_embedding_or_output_weight() if self.share_embeddings_and_output_weights else None
        logits, _ = self.output_layer(h, weight=weight)
        if labels is None:
            return logits.transpose(0, 1).contiguous()
        return self.compute_language_model_loss(labels, logits)


def build_model(spec: ModelSpec, tensor_parallel: int = 1, expert_parallel: int = 1, dtype=torch.float32,
                parallel_output: bool = True) -> HybridGPTModel:  # fmt: skip
    """The model of `spec` for this rank (megatron-core's parallel_state must be initialised with these sizes)."""
    from dayone.adapters.megatron.cpu import install_cpu_standins

    install_cpu_standins()
    config = transformer_config(spec, tensor_parallel, expert_parallel, dtype)
    return HybridGPTModel(config, spec, parallel_output)
