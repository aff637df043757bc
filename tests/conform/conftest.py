"""Session fixtures: one probe run per spec and world size, shared by every test that reads it."""

from __future__ import annotations

import pytest
from conform_fixtures import prepare, tiny

# The conform tests' own engine runs are of Kimi Linear, its experts widened so that world size 2 splits each over
# both ranks; the README run's K3 (tests/run/test_demo_conformance.py) is the one whose experts are spread whole.
SPEC = "kimi-linear-48b-a3b"


@pytest.fixture(scope="session")
def shipped(tmp_path_factory):
    """(spec, checkpoint, adapter, vLLM conform report at world size 1 and 2) of SPEC at tiny widths."""
    from dayone.conform.driver import conform_target

    spec = tiny(SPEC)
    checkpoint, adapter = prepare(tmp_path_factory.mktemp(SPEC), spec)
    return spec, checkpoint, adapter, conform_target("vllm", adapter, checkpoint, spec, (1, 2))
