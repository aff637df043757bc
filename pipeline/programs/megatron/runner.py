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
from dayone.programs.megatron import verdicts
from dayone.programs.megatron.checks import ADAPTER_CHECKS, MODEL_CHECK, PROGRAMS, check_arguments
from dayone.spec.registry import spec_to_dict
from dayone.spec.schema import ModelSpec

# (spec JSON, check) -> report. Miles and Megatron-Bridge share one model, so one model check per spec.
_DONE: dict[tuple[str, str], dict] = {}
# spec JSON -> the adapter checks a generate will ask for (plan_checks): they run with the model check, in one batch.
_PLANNED: dict[str, tuple[str, ...]] = {}
BATCH = "dayone.programs.megatron.batch"
# (spec JSON, check) whose passing report was kept from an earlier run (verdicts.py) rather than run here.
_REUSED: set[tuple[str, str]] = set()


def plan_checks(spec: ModelSpec, targets) -> None:
    """Say which targets a generate will check, before it checks the first: the model check and those targets' adapter
    checks then run together on first use, from one interpreter (batch.py: torch and megatron-core imported once,
    3 s of each check's 4 s)."""
    _PLANNED[_key(spec)] = tuple(t for t in targets if t in ADAPTER_CHECKS)


def megatron_checks(spec: ModelSpec, timeout: int = 900) -> dict:
    """{"status": "pass" | "fail" | "not run", ...}: the model built by megatron-core at tiny scale against the
    weight map, a synthetic checkpoint's round trip and the reference tier's log-probs (see verify.py)."""
    return _result(spec, MODEL_CHECK, timeout)


def adapter_checks(spec: ModelSpec, target: str, timeout: int = 900) -> dict:
    """The generated Miles package (arguments, --spec plugin, weight sync) or Megatron-Bridge package (provider,
    mapping registry) run against megatron-core / megatron-bridge for `spec` at tiny scale."""
    return _result(spec, target, timeout)


def reused(spec: ModelSpec, checks) -> list[str]:
    """Those of `checks` whose pass for `spec` was kept from an earlier run of the same inputs, not run here."""
    key = _key(spec)
    return [c for c in checks if (key, c) in _REUSED]


def _key(spec: ModelSpec) -> str:
    return json.dumps(spec_to_dict(spec), sort_keys=True)


def _result(spec: ModelSpec, check: str, timeout: int) -> dict:
    key = _key(spec)
    if (key, check) not in _DONE:
        batch = [c for c in (MODEL_CHECK, *_PLANNED.get(key, ())) if (key, c) not in _DONE]
        batch = batch if check in batch else [check]
        # A pass kept from an earlier run of the same inputs (verdicts.py) is not run again; the rest run as one batch.
        peer = peer_path()
        digests = {c: verdicts.key(key, c, peer) for c in batch} if (peer / RELEASE).is_dir() else {}
        for name, digest in digests.items():
            report = verdicts.kept(digest)
            if report is not None:
                _DONE[key, name] = report
                _REUSED.add((key, name))
        todo = [c for c in batch if (key, c) not in _DONE]
        if todo:
            for name, report in _run(spec, todo, timeout).items():
                _DONE[key, name] = report
                if name in digests:
                    verdicts.keep(digests[name], report)
    return _DONE[key, check]


def _run(spec: ModelSpec, checks: list[str], timeout: int = 900) -> dict[str, dict]:
    """{check: report} of `checks` run for `spec` in the megatron peer: one alone as its own program, several as
    one batch."""
    peer = peer_path()
    if not (peer / RELEASE).is_dir():
        why = f"megatron-core {CORE.version} is not installed in {peer} (.ci/setup.d/30-megatron.sh)"
        return {check: {"status": "not run", "why": why, "failures": []} for check in checks}
    with tempfile.TemporaryDirectory(prefix="dayone-megatron-") as folder:
        spec_file = Path(folder) / f"{spec.name}.json"
        spec_file.write_text(json.dumps(spec_to_dict(spec)))
        work = Path(folder) / "work"
        work.mkdir()
        if len(checks) == 1:
            args = [PROGRAMS[checks[0]], *check_arguments(checks[0], str(spec_file), work)]
        else:
            args = [BATCH, str(spec_file), str(work), *checks]
        proc = _start(args, peer, timeout)
    if len(checks) == 1:
        return {checks[0]: _report(PROGRAMS[checks[0]], proc.returncode, proc.stdout, proc.stderr)}
    start = proc.stdout.find("{")
    if proc.returncode != 0 or start < 0:
        failed = {"status": "fail", "failures": [f"{BATCH} did not run: {proc.stderr.strip()[-500:]}"]}
        return {check: failed for check in checks}
    ran = json.loads(proc.stdout[start:])
    return {c: _report(PROGRAMS[c], ran[c]["returncode"], ran[c]["output"], ran[c]["errors"]) for c in checks}


def peer_environment(peer: Path, base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment a Megatron program runs in: `base` (this process's by default) with the peer on PYTHONPATH.

    TORCHDYNAMO_DISABLE: megatron-core wraps its fusions (the router's among them) in torch.compile (its jit_fuser,
    which Megatron-LM's --disable-jit-fuser turns off); on these CPU checks dynamo's tracing fuses nothing and took
    a fifth of a batch's CPU (3 s of 14 for the tiny K3), besides inductor's C++ build of each fusion where its
    cache is empty, as on a new CI runner. The functions run as written, eagerly. The tests that start a program
    themselves take this environment too, so that they check the model the way the runner runs it."""
    return dict(os.environ if base is None else base, PYTHONPATH=str(peer), PYTHONWARNINGS="ignore",
                TORCHDYNAMO_DISABLE="1")  # fmt: skip


def _start(args: list[str], peer: Path, timeout: int):
    env = peer_environment(peer)
    # In a process group that dies with dayone (a SIGKILLed run left this child running), killed whole on timeout.
    # -P: the working directory stays off sys.path. Run from a checkout, its top-level folders are dayone's
    # subpackages and `kernels` would hide Hugging Face's `kernels`, which transformers >= 5.25 imports.
    return child.run([sys.executable, "-P", "-m", *args], capture_output=True, text=True, env=env, timeout=timeout)


def _report(module: str, returncode: int, stdout: str, stderr: str) -> dict:
    start = stdout.find("{")
    if start < 0:
        return {"status": "fail", "failures": [f"{module} did not run: {stderr.strip()[-500:]}"]}
    report = json.loads(stdout[start:])
    report["status"] = "pass" if not report["failures"] and returncode == 0 else "fail"
    return report
