"""One SGD step on the tiny checkpoint in the Megatron model (KDA trained through the chunked autograd path) and
the same step in dayone's reference tier: the same loss and the same updated weights, every tensor, within 1e-5 in
fp32 (`dayone.programs.megatron.train_step`, run in the megatron peer). A planted mistake (the reference tier's
derived tensors kept out of autograd) must be reported."""

from __future__ import annotations

import json
import subprocess
import sys

from dayone.adapters.megatron.peer import RELEASE, peer_path
from dayone.programs.megatron.runner import peer_environment

PEER = peer_path()


def run_step(*args: str) -> tuple[int, dict]:
    assert (PEER / RELEASE).is_dir(), f"run bash .ci/setup.d/30-megatron.sh ({PEER})"
    env = peer_environment(PEER)
    proc = subprocess.run(
        [sys.executable, "-P", "-m", "dayone.programs.megatron.train_step", "kimi-k3", *args],
        capture_output=True, text=True, env=env, timeout=600, check=False,
    )  # fmt: skip
    start = proc.stdout.find("{")
    assert start >= 0, proc.stderr[-3000:]
    return proc.returncode, json.loads(proc.stdout[start:])


def test_one_step_matches_the_reference_tier():
    code, report = run_step()
    print(report)
    assert report["failures"] == [] and code == 0
    assert report["loss_abs_diff"] <= 1e-5 and report["updated_weight_abs_diff_max"] <= 1e-5
    # every language-model weight moved except those with no gradient by construction (the first layer's
    # attention-residual mix); the vision tower passes through
    assert report["tensors_moved"] > 150


def test_a_missing_gradient_path_is_reported():
    code, report = run_step("--plant", "stale-derived")
    assert code == 1
    assert any("attn_res" in f or "_res_" in f for f in report["failures"]), report["failures"]
