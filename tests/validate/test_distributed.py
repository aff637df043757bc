"""Two ranks (torchrun, gloo on the CPU) split the layers and hand the residual state on: same report as one."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from cli_runner import integrate
from validate_fixtures import ONE_THREAD


def _comparable(path) -> dict:
    report = json.loads(path.read_text())
    report.pop("created")
    for key in ("seconds", "ranks"):
        report["details"].pop(key)
    return report


def test_two_ranks_equal_one(k3_13, tokens_file, tmp_path):
    """13 layers: rank 0 holds 0-5 (embedding, the layer-0 snapshot), rank 1 holds 6-12 (the layer-12 snapshot, the
    head), so the hand-over carries a one-entry bank. Both runs use one thread per process, as torchrun's do."""
    args = ["validate", str(k3_13), "--tokens", str(tokens_file), "--reference", "naive"]
    single = integrate(*args, "--report", tmp_path / "single.json", env=ONE_THREAD)
    assert single.code == 0, single.err
    env = {**os.environ, **ONE_THREAD}
    env.pop("TRITON_INTERPRET", None)
    proc = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
         "-m", "dayone", *args, "--report", str(tmp_path / "two.json")],
        capture_output=True, text=True, env=env, timeout=300, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    two = json.loads((tmp_path / "two.json").read_text())
    assert two["details"]["ranks"] == 2
    assert _comparable(tmp_path / "two.json") == _comparable(tmp_path / "single.json")
