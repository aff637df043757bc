"""Fixtures for the generated-adapter tests: the parallel tiny K3 written as a release-format checkpoint (sharded
safetensors, MXFP4 experts), a smaller K3 for RL runs, and the four targets generated for the first."""

from __future__ import annotations

import pytest
from generate_fixtures import parallel_k3_spec, write_release
from model_fixtures import random_checkpoint, tiny_k3_spec


@pytest.fixture(scope="session")
def k3(tmp_path_factory):
    """(spec, checkpoint tensors as read back from disk) of the parallel tiny K3."""
    spec = parallel_k3_spec()
    tensors = write_release(tmp_path_factory.mktemp("k3-release"), spec, random_checkpoint(spec, seed=11))
    return spec, tensors


@pytest.fixture(scope="session")
def small_k3():
    """The 5-layer tiny K3 of the model tests (2 heads): quick for the RL parity runs."""
    spec = tiny_k3_spec(5)
    return spec, random_checkpoint(spec, seed=3)


@pytest.fixture(scope="session")
def generated(tmp_path_factory, k3):
    """{target: folder} of the four targets generated for the parallel tiny K3."""
    from dayone.adapters.targets import TARGETS, common, generator

    root = tmp_path_factory.mktemp("generated")
    for target in TARGETS:
        common.write_tree(root / target, generator(target)(k3[0]))
    return {target: root / target for target in TARGETS}
