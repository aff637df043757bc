"""Checkpoints for the validation tests, each written once per session: synthetic K3 (all 93 layers, and 13 layers:
one snapshot transition), synthetic Kimi Linear, and transformers-written Kimi Linear variants (tests/model)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "model"))

from model_fixtures import KIMI_LINEAR_VARIANTS, write_kimi_linear
from validate_fixtures import SHORT_TOKENS, synthetic


@pytest.fixture(autouse=True)
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def tokens_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("tokens") / "tokens.json"
    path.write_text(SHORT_TOKENS)
    return path


@pytest.fixture(scope="session")
def k3_tiny(tmp_path_factory) -> Path:
    return synthetic(tmp_path_factory.mktemp("k3") / "kimi-k3-tiny", "kimi-k3")


@pytest.fixture(scope="session")
def k3_13(tmp_path_factory) -> Path:
    return synthetic(tmp_path_factory.mktemp("k3-13") / "kimi-k3-13", "kimi-k3", layers=13)


@pytest.fixture(scope="session")
def k3_13_other_seed(tmp_path_factory) -> Path:
    return synthetic(tmp_path_factory.mktemp("k3-13b") / "kimi-k3-13b", "kimi-k3", layers=13, seed=1)


@pytest.fixture(scope="session", params=list(KIMI_LINEAR_VARIANTS))
def kimi_linear_dir(request, tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp(request.param) / request.param
    write_kimi_linear(path, seed=len(request.param), **KIMI_LINEAR_VARIANTS[request.param])
    return path
