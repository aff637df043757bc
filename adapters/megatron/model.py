"""The language model of a spec: megatron-core's GPTModel (embedding, TransformerBlock, vocab-parallel output
layer) over the spec's layer specs, as Miles and Megatron-Bridge build their GPT models.

    model = build_model(spec)       # parallel_state initialised; names = the weight map's megatron layout
    logits = model(input_ids, position_ids=None, attention_mask=None)   # [b, s] -> [b, s, vocab / TP]
"""

from __future__ import annotations

import torch
from dayone.adapters.megatron.config import transformer_config
from dayone.adapters.megatron.layer_specs import block_spec
from dayone.spec.schema import ModelSpec
from megatron.core.models.gpt.gpt_model import GPTModel
from megatron.core.transformer.transformer_config import TransformerConfig


def gpt_model(config: TransformerConfig, spec: ModelSpec, parallel_output: bool = True) -> GPTModel:
    return GPTModel(
        config=config,
        transformer_layer_spec=block_spec(spec),
        vocab_size=spec.vocab_size,
        max_sequence_length=spec.max_position_embeddings,
        parallel_output=parallel_output,
        share_embeddings_and_output_weights=spec.tie_word_embeddings,
        position_embedding_type="none",
    )


def build_model(
    spec: ModelSpec,
    tensor_parallel: int = 1,
    expert_parallel: int = 1,
    dtype=torch.float32,
    parallel_output=True,
    sequence_parallel: bool = False,
) -> GPTModel:
    """The model of `spec` for this rank (megatron-core's parallel_state must be initialised with these sizes)."""
    from dayone.adapters.megatron.cpu import install_cpu_standins

    install_cpu_standins()
    config = transformer_config(spec, tensor_parallel, expert_parallel, dtype, sequence_parallel=sequence_parallel)
    return gpt_model(config, spec, parallel_output)
