"""Session fixtures: tiny checkpoints built once (transformers-written Kimi Linear ones, random K3-shaped ones)."""

from __future__ import annotations

import pytest
import torch
from model_fixtures import KIMI_LINEAR_VARIANTS, random_checkpoint, tiny_k3_spec, write_kimi_linear


@pytest.fixture(autouse=True)
def one_thread():
    """One intra-op thread: on a shared machine two OpenMP threads spin against other processes' load and a tiny
    model's thousands of small matmuls slow down tenfold; the tolerances hold either way."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


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
