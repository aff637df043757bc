"""Run the Megatron checks for a spec in the megatron peer environment, from the main one: the model (`verify`, once
per spec) and what a target generated for it does there (`check_miles`, `check_bridge`).

Where the peer is missing the result says "not run" and why; nothing is reported as passing that did not run.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

from dayone.adapters.megatron.peer import CORE, RELEASE, peer_path
from dayone.core import child
from dayone.spec.registry import spec_to_dict
from dayone.spec.schema import ModelSpec

_DONE: dict[str, dict] = {}  # spec JSON -> report: Miles and Megatron-Bridge share one model, so one run


def megatron_checks(spec: ModelSpec, timeout: int = 900) -> dict:
    """{"status": "pass" | "fail" | "not run", ...}: the model built by megatron-core at tiny scale against the
    weight map, a synthetic checkpoint's round trip and the reference tier's log-probs (see verify.py)."""
    key = json.dumps(spec_to_dict(spec), sort_keys=True)
    if key not in _DONE:
        _DONE[key] = _run(spec, timeout=timeout)
    return _DONE[key]


ADAPTER_CHECKS = {
    "miles": "dayone.programs.megatron.check_miles",
    "megatron-bridge": "dayone.programs.megatron.check_bridge",
}


def adapter_checks(spec: ModelSpec, target: str, timeout: int = 900) -> dict:
    """The generated Miles package (arguments, --spec plugin, weight sync) or Megatron-Bridge package (provider,
    mapping registry) run against megatron-core / megatron-bridge for `spec` at tiny scale."""
    return _run(spec, ADAPTER_CHECKS[target], timeout, out_dir=True)


def _run(spec: ModelSpec, module: str = "dayone.programs.megatron.verify", timeout: int = 900, out_dir=False) -> dict:
    peer = peer_path()
    if not (peer / RELEASE).is_dir():
        why = f"megatron-core {CORE.version} is not installed in {peer} (.ci/setup.d/30-megatron.sh)"
        return {"status": "not run", "why": why, "failures": []}
    with tempfile.TemporaryDirectory(prefix="dayone-megatron-") as folder:
        spec_file = Path(folder) / f"{spec.name}.json"
        spec_file.write_text(json.dumps(spec_to_dict(spec)))
        env = dict(os.environ, PYTHONPATH=str(peer), PYTHONWARNINGS="ignore")
        args = [str(spec_file), *([str(Path(folder) / "work")] if out_dir else [])]
        # In a process group that dies with dayone (a SIGKILLed run left this child running), killed whole on timeout.
        # -P: the working directory stays off sys.path. Run from a checkout, its top-level folders are dayone's
        # subpackages and `kernels` would hide Hugging Face's `kernels`, which transformers >= 5.25 imports.
        proc = child.run(
            [sys.executable, "-P", "-m", module, *args], capture_output=True, text=True, env=env, timeout=timeout
        )
    start = proc.stdout.find("{")
    if start < 0:
        return {"status": "fail", "failures": [f"{module} did not run: {proc.stderr.strip()[-500:]}"]}
    report = json.loads(proc.stdout[start:])
    report["status"] = "pass" if not report["failures"] and proc.returncode == 0 else "fail"
    return report
