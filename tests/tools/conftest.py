"""Tiny checkpoints for the checkpoint-tool tests, written once per session."""

from __future__ import annotations

import pytest
from tools_fixtures import tiny_k3_spec, tiny_kimi_linear_spec, write_tiny_k3


@pytest.fixture(scope="session")
def k3_spec():
    return tiny_k3_spec(25)


@pytest.fixture(scope="session")
def k3_dir(tmp_path_factory, k3_spec):
    """25-layer K3-shaped checkpoint, 3 shards, MXFP4 experts, vision tower, a tokenizer file."""
    return write_tiny_k3(tmp_path_factory.mktemp("k3") / "src", k3_spec, num_shards=3)


@pytest.fixture(scope="session")
def kimi_linear_dir(tmp_path_factory):
    return write_tiny_k3(tmp_path_factory.mktemp("kl") / "src", tiny_kimi_linear_spec(), num_shards=2)
