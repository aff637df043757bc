"""Session fixtures: tiny checkpoints built once (transformers-written Kimi Linear ones, random K3-shaped ones)."""

from __future__ import annotations

import pytest
import torch
from model_fixtures import random_checkpoint, tiny_k3_spec, write_kimi_linear

# Kimi Linear variants: dense first layer or not, head and expert counts, q LoRA on and off.
KIMI_LINEAR_VARIANTS = {
    "dense0-noqlora": {},
    "nodense-qlora": {
        "first_k_dense_replace": 0,
        "q_lora_rank": 16,
        "num_attention_heads": 4,
        "num_key_value_heads": 4,
        "num_local_experts": 6,
        "num_experts_per_tok": 3,
        "n_shared_experts": 2,
        "linear_attn_config": {
            "kda_layers": [1, 3],
            "full_attn_layers": [2, 4],
            "head_dim": 8,
            "num_heads": 4,
            "short_conv_kernel_size": 3,
        },
    },
    "dense2-qlora-noshared": {
        "first_k_dense_replace": 2,
        "q_lora_rank": 24,
        "num_local_experts": 8,
        "num_experts_per_tok": 2,
        "n_shared_experts": 0,
        "routed_scaling_factor": 1.0,
    },
}


@pytest.fixture(scope="session", params=list(KIMI_LINEAR_VARIANTS))
def kimi_linear(request, tmp_path_factory):
    """(transformers model, derived spec, checkpoint tensors) of one variant."""
    path = tmp_path_factory.mktemp(request.param)
    return write_kimi_linear(path, seed=len(request.param), **KIMI_LINEAR_VARIANTS[request.param])


@pytest.fixture(scope="session")
def k3_93():
    spec = tiny_k3_spec(93)
    return spec, random_checkpoint(spec, seed=1)


@pytest.fixture(scope="session")
def k3_25():
    spec = tiny_k3_spec(25)
    return spec, random_checkpoint(spec, seed=2)


@pytest.fixture(scope="session")
def k3_5():
    spec = tiny_k3_spec(5)
    return spec, random_checkpoint(spec, seed=3)


@pytest.fixture
def prompts():
    """Three requests of different lengths, left-aligned in [3, 9] (padding id 0 past each length)."""
    gen = torch.Generator().manual_seed(7)
    ids = torch.randint(3, 96, (3, 9), generator=gen)
    lengths = [9, 5, 1]
    for b, n in enumerate(lengths):
        ids[b, n:] = 0
    return ids, lengths
