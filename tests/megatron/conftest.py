"""One RL iteration (rl_iteration.py: a vLLM session's rollout and refit around a Megatron training step) per test
session, shared by the Miles end-to-end and refit tests: one engine start serves both."""

from __future__ import annotations

import pytest
from rl_iteration import Iteration, run_iteration


@pytest.fixture(scope="session")
def rl_iteration(tmp_path_factory) -> Iteration:
    return run_iteration(tmp_path_factory.mktemp("rl_iteration"))
