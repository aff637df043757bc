"""One RL iteration as Miles runs it, with vLLM as the rollout engine, on the tiny K3 stand-in (fp32, CPU).

The checkpoint (dayone's synth, experts unquantized: training holds them in float) is served by one vLLM session
with the generated vLLM adapter (pipeline/programs/engines/vllm_rl_session.py, the vLLM peer): it samples the
rollout and scores it. Meanwhile the trainer (dayone.programs.megatron.miles_trainer, the megatron peer) builds the
Megatron model through the generated Miles package, syncs its weights through Miles' own converter entry (the
pinned Miles files in tests/data with the package's dispatch patch applied), scores the rollout, takes one SGD step
and writes the updated weights; the still-running engine loads them through vLLM's own in-place weight update
(`reload_weights`) and scores the same sequences again. The two peers share nothing but files.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from dayone.adapters.megatron.peer import RELEASE, peer_path
from dayone.programs.megatron.runner import peer_environment

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
MEGATRON_PEER = peer_path()
MILES_FILES = ROOT / "tests" / "data" / "vendor" / "miles-c7969ad1f"
SESSION = ROOT / "pipeline" / "programs" / "engines" / "vllm_rl_session.py"
SPEC = "kimi-k3"
# Prompts of different lengths, each sampled for 8 tokens (Miles' responses): 3 samples, 24 response tokens.
PROMPTS = [[5, 17, 33, 9, 120], [7, 8, 9, 10, 11, 12, 13, 14, 200, 3, 4, 5], [40, 41, 2, 99, 150, 151, 30, 31, 64]]
RESPONSE = 8
ENGINE_START_S = 600  # the engine's start and rollout; the machine may be shared with other tests


@dataclass
class Iteration:
    spec: object
    package: Path  # the generated Miles package
    miles: Path  # the patched Miles tree
    session: dict  # vllm_rl_session.py's session.json
    trainer: dict  # miles_trainer's trainer.json
    seconds: dict


def blob(path: Path) -> str:
    """git's blob id of a file (what `git hash-object` prints)."""
    data = path.read_bytes()
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def vendored_blobs() -> dict[str, str]:
    """{path: blob} as tests/data/vendor/miles-c7969ad1f/README.md lists them."""
    text = (MILES_FILES / "README.md").read_text()
    return {path: sha for sha, path in re.findall(r"^ {4}([0-9a-f]{40})  (\S+)$", text, re.MULTILINE)}


def miles_tree(dest: Path, patch: str | None) -> Path:
    """The vendored Miles files copied to dest (each checked against its blob at the pinned commit), with `patch`
    applied by `git apply` as the recipe applies it; None leaves Miles as it is."""
    for path, sha in vendored_blobs().items():
        assert blob(MILES_FILES / path) == sha, f"tests/data copy of Miles' {path} is not the pinned blob"
    shutil.copytree(MILES_FILES / "miles", dest / "miles")
    if patch is not None:
        (dest / "dispatch.patch").write_text(patch)
        subprocess.run(["git", "apply", "dispatch.patch"], cwd=dest, check=True, capture_output=True, text=True)
    return dest


def run_iteration(root: Path) -> Iteration:
    from dayone.adapters.targets import common, miles, vllm
    from dayone.conform import peers
    from dayone.programs.megatron.train_step import stand_in
    from dayone.synth import write_synthetic

    vllm_python = peers.peer_python("vllm")
    assert vllm_python is not None, peers.missing("vllm")
    assert (MEGATRON_PEER / RELEASE).is_dir(), f"run bash .ci/setup.d/30-megatron.sh ({MEGATRON_PEER})"
    spec = stand_in(SPEC, None)
    checkpoint = root / "checkpoint"
    write_synthetic(spec, checkpoint, seed=7)
    common.write_tree(root / "adapter", vllm.files(spec))
    peers.install_adapter(root / "adapter", vllm_python, root / "site", root / "scratch")
    package = root / "miles_package"
    files = miles.files(spec)
    common.write_tree(package, files)
    tree = miles_tree(root / "miles", files["miles_megatron_to_hf.patch"])
    prompts = root / "prompts.json"
    prompts.write_text(json.dumps([{"prompt": p, "max_tokens": RESPONSE} for p in PROMPTS]))
    engine_out, trainer_out = root / "engine", root / "trainer"
    refit = trainer_out / "refit.safetensors"

    seconds = {}
    start = time.monotonic()
    env = dict(os.environ, OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1"))
    with open(root / "engine.log", "w") as log:
        engine = subprocess.Popen(
            [str(vllm_python), str(SESSION), "--package-site", str(root / "site"), "--checkpoint", str(checkpoint),
             "--prompts", str(prompts), "--out", str(engine_out), "--refit", str(refit)],
            stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True,
        )  # fmt: skip
    try:
        while not (engine_out / "rollout.json").is_file():
            assert engine.poll() is None, _engine_failure(root)
            assert time.monotonic() - start < ENGINE_START_S, f"no rollout after {ENGINE_START_S} s"
            time.sleep(1)
        seconds["engine_start_and_rollout"] = round(time.monotonic() - start, 1)
        start = time.monotonic()
        proc = subprocess.run(
            [sys.executable, "-P", "-m", "dayone.programs.megatron.miles_trainer", SPEC, "--package", str(package),
             "--miles", str(tree), "--checkpoint", str(checkpoint), "--rollout", str(engine_out / "rollout.json"),
             "--out", str(trainer_out)],
            capture_output=True, text=True, timeout=900, check=False,
            env=peer_environment(MEGATRON_PEER, env),
        )  # fmt: skip
        seconds["trainer"] = round(time.monotonic() - start, 1)
        assert (trainer_out / "trainer.json").is_file(), proc.stderr[-3000:]
        trainer = json.loads((trainer_out / "trainer.json").read_text())
        assert refit.is_file(), f"the trainer wrote no weights: {trainer['failures']}"
        start = time.monotonic()
        engine.wait(timeout=600)
        seconds["refit_and_score"] = round(time.monotonic() - start, 1)
    finally:
        if engine.poll() is None:
            os.killpg(engine.pid, signal.SIGKILL)
            engine.wait()
    session = json.loads((engine_out / "session.json").read_text())
    assert session["status"] == "ran", f"{session['detail']}\n{session.get('traceback', '')}"
    return Iteration(spec, package, tree, session, trainer, seconds)


def _engine_failure(root: Path) -> str:
    session = root / "engine" / "session.json"
    if session.is_file():
        data = json.loads(session.read_text())
        return f"the engine session ended: {data['detail']}\n{data.get('traceback', '')}"
    return "the engine session ended: " + (root / "engine.log").read_text()[-3000:]
