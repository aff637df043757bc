"""Run the Megatron checks (`verify.py`) for a spec in the megatron peer environment, from the main one.

The peer is .venv/peers/megatron (`.ci/setup.d/30-megatron.sh`), or DAYONE_MEGATRON_PEER. Where it is missing the
result says "not run" and why; nothing is reported as passing that did not run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from dayone.spec.registry import spec_to_dict
from dayone.spec.schema import ModelSpec

RELEASE = "megatron_core-0.16.1.dist-info"


def peer_path() -> Path:
    return Path(os.environ.get("DAYONE_MEGATRON_PEER") or Path(sys.prefix) / "peers" / "megatron")


_DONE: dict[str, dict] = {}  # spec JSON -> report: Miles and Megatron-Bridge share one model, so one run


def megatron_checks(spec: ModelSpec, timeout: int = 900) -> dict:
    """{"status": "pass" | "fail" | "not run", ...}: the model built by megatron-core at tiny scale against the
    weight map, a synthetic checkpoint's round trip and the reference tier's log-probs (see verify.py)."""
    key = json.dumps(spec_to_dict(spec), sort_keys=True)
    if key not in _DONE:
        _DONE[key] = _run(spec, timeout)
    return _DONE[key]


def _run(spec: ModelSpec, timeout: int = 900) -> dict:
    peer = peer_path()
    if not (peer / RELEASE).is_dir():
        return {
            "status": "not run",
            "why": f"megatron-core 0.16.1 is not installed in {peer} (.ci/setup.d/30-megatron.sh)",
        }
    with tempfile.TemporaryDirectory(prefix="dayone-megatron-") as folder:
        spec_file = Path(folder) / f"{spec.name}.json"
        spec_file.write_text(json.dumps(spec_to_dict(spec)))
        env = dict(os.environ, PYTHONPATH=str(peer), PYTHONWARNINGS="ignore")
        proc = subprocess.run(
            [sys.executable, "-m", "dayone.adapters.megatron.verify", str(spec_file)],
            capture_output=True, text=True, env=env, timeout=timeout, check=False,
        )  # fmt: skip
    start = proc.stdout.find("{")
    if start < 0:
        return {"status": "fail", "failures": [f"the Megatron checks did not run: {proc.stderr.strip()[-500:]}"]}
    report = json.loads(proc.stdout[start:])
    report["status"] = "pass" if not report["failures"] and proc.returncode == 0 else "fail"
    return report
