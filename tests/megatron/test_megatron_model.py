"""The Megatron model of each shipped spec, built by megatron-core 0.16.1 (the peer in .venv/peers/megatron, installed
by .ci/setup.d/30-megatron.sh) on gloo CPU ranks: its tensors are exactly the weight map's Megatron side, a
synthetic release-format checkpoint loads through the map and converts back bitwise, per-token log-probs agree with
the reference tier within 1e-5 (fp32), so does the train/rollout parity Miles gates on (reference-tier rollout with
cached decode, re-scored by the Megatron model), and in training (sequence parallel at TP 2) every parameter that can
get a gradient on its rank gets a finite non-zero one. `dayone.programs.megatron.verify` runs the checks in a process of its own with the peer on its path. Kimi Linear
(and K3 again) run through `integrate generate --check` in tests/generate/test_generate_command.py."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from dayone.adapters.megatron.peer import CORE, RELEASE, peer_path
from dayone.programs.megatron.runner import peer_environment

PEER = peer_path()


def run_verify(*args: str) -> tuple[int, dict, str]:
    assert (PEER / RELEASE).is_dir(), (
        f"megatron-core {CORE.version} is not installed in {PEER}: run bash .ci/setup.d/30-megatron.sh"
    )
    env = peer_environment(PEER)
    proc = subprocess.run(
        [sys.executable, "-P", "-m", "dayone.programs.megatron.verify", *args],
        capture_output=True, text=True, env=env, timeout=600, check=False,
    )  # fmt: skip
    start = proc.stdout.find("{")
    report = json.loads(proc.stdout[start:]) if start >= 0 else {}
    return proc.returncode, report, proc.stderr[-3000:]


@pytest.mark.parametrize(
    "args",
    [
        ("kimi-k3",),
        ("kimi-k3", "--world-size", "2", "--tp", "2", "--ep", "2"),
    ],
    ids=["k3-ws1", "k3-ws2-tp2-ep2"],
)
def test_megatron_model_matches_map_and_reference(args):
    code, report, err = run_verify(*args)
    assert report, err
    print(json.dumps({k: v for k, v in report.items() if k != "buffers_mapped"}))
    assert report["failures"] == [] and code == 0
    assert report["round_trip_tensors"] > 0
    assert report["logprob_abs_diff_max"] < 1e-5
    assert report["megatron_tokens"] == 8 and report["megatron_train_rollout_logprob_abs_diff_max"] < 1e-5
    assert 0 <= report["megatron_train_rollout_kl"] < 1e-5
    assert report["megatron_bridge_import"].startswith(("ok", "not run: import megatron.bridge needs"))
    assert report["gradients_checked"] == report["parameters"]  # TP > 1 trains with sequence parallelism
