"""Session fixtures: one probe run per shipped spec and world size, shared by every test that reads it."""

from __future__ import annotations

import pytest
from conform_fixtures import prepare, tiny

SPECS = ("kimi-k3", "kimi-linear-48b-a3b")


@pytest.fixture(scope="session")
def shipped(tmp_path_factory):
    """{spec name: (spec, checkpoint, adapter, conform report at world size 1 and 2)} for vLLM."""
    from dayone.conform.driver import conform_target

    out = {}
    for name in SPECS:
        spec = tiny(name)
        root = tmp_path_factory.mktemp(name)
        checkpoint, adapter = prepare(root, spec)
        out[name] = (spec, checkpoint, adapter, conform_target("vllm", adapter, checkpoint, spec, (1, 2)))
    return out
