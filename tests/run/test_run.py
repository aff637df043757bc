"""`integrate run`: every stage, resumable after kill -9 with byte-identical outputs, and a rerun that reuses all."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cli_runner import integrate

# Reproducible report timestamps (the reproducible-builds convention): two runs can then be compared byte for byte.
EPOCH = {"SOURCE_DATE_EPOCH": "1700000000"}
SCRATCH = {"logs", "cache"}  # timings and the kernel cache: not outputs


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> Path:
    """A tiny K3 with 13 layers: the snapshot at layer 12 is crossed, MXFP4 experts, vision passthrough."""
    path = tmp_path_factory.mktemp("ckpt") / "kimi-k3-mini"
    result = integrate("synth", "kimi-k3", "--scale", "tiny", "--layers", "13", "-o", path)
    assert result.code == 0, result.err
    return path


def run_args(checkpoint: Path, out: Path) -> list[str]:
    return ["run", str(checkpoint), "--target", "sglang", "--target", "miles", "--arch", "sm_90", "-o", str(out)]


def outputs(out: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(out)): p.read_bytes()
        for p in sorted(out.rglob("*"))
        if p.is_file() and p.relative_to(out).parts[0] not in SCRATCH
    }


@pytest.fixture(scope="module")
def uninterrupted(checkpoint, tmp_path_factory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("run-a") / "out"
    result = integrate(*run_args(checkpoint, out), "--json", env=EPOCH)
    assert result.code == 0, result.out[-2000:] + result.err[-2000:]
    return out, json.loads(result.out)


def test_every_stage_passes(uninterrupted):
    out, report = uninterrupted
    assert report["ok"]
    assert [s["stage"] for s in report["stages"]] == [
        "spec", "coverage", "plan", "generate", "compile", "validate", "package"
    ]  # fmt: skip
    assert (out / "site" / "index.html").is_file()
    dist = out / "stages" / "package" / "dist"
    assert {p.suffix for p in dist.iterdir()} >= {".whl", ".gz", ".md"} and (dist / "SHA256SUMS").is_file()
    assert json.loads((out / "report.json").read_text()) == report


def test_rerun_with_nothing_changed_reuses_every_stage(checkpoint, uninterrupted):
    out, _ = uninterrupted
    before = outputs(out)
    result = integrate(*run_args(checkpoint, out), env=EPOCH)
    assert result.code == 0, result.err[-2000:]
    assert result.out.count("cached") == 7, result.out
    assert outputs(out) == before


def test_killed_runs_resume_to_identical_outputs(checkpoint, uninterrupted, tmp_path):
    """kill -9 at several moments (during synth-free stages: spec ... package), resume, compare every byte."""
    reference, _ = uninterrupted
    out = tmp_path / "out"
    env = {**os.environ, **EPOCH}
    env.pop("TRITON_INTERPRET", None)
    for delay in (1.5, 4.0, 8.0):
        proc = subprocess.Popen([sys.executable, "-m", "dayone", *run_args(checkpoint, out)], env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
        time.sleep(delay)
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
        proc.wait()
    result = integrate(*run_args(checkpoint, out), env=EPOCH)
    assert result.code == 0, result.err[-2000:]
    assert outputs(out) == outputs(reference)


def test_changed_input_reruns_only_what_depends_on_it(checkpoint, uninterrupted, tmp_path):
    out = tmp_path / "out"
    integrate(*run_args(checkpoint, out), env=EPOCH)
    result = integrate(*run_args(checkpoint, out)[:-2], "--gpus", "2", "-o", str(out), env=EPOCH)
    lines = {line.split("│")[1].strip(): line for line in result.out.splitlines() if line.count("│") >= 4}
    assert "cached" in lines["spec"] and "cached" in lines["coverage"]
    assert "cached" not in lines["plan"]


def test_bad_input(tmp_path):
    result = integrate("run", "-o", tmp_path / "out")
    assert result.code == 2 and "CHECKPOINT or --demo" in result.err
    result = integrate("run", tmp_path / "missing", "-o", tmp_path / "out")
    assert result.code == 2 and len(result.err.strip().splitlines()) == 1


def test_demo_from_nothing(tmp_path):
    """The README's main command: a tiny K3 synthesised in the release format, then every stage, all green."""
    out = tmp_path / "demo"
    result = integrate("run", "--demo", "-o", out, "--json")
    assert result.code == 0, result.out[-2000:] + result.err[-2000:]
    report = json.loads(result.out)
    assert report["ok"] and report["spec"] == "kimi-k3-tiny"
    assert report["stages"][0]["stage"] == "synth"
    assert all(s["status"] == "pass" for s in report["stages"])
    assert len(list((out / "stages" / "synth" / "kimi-k3-tiny").glob("model-*.safetensors"))) == 3
    again = integrate("run", "--demo", "-o", out)
    assert again.code == 0 and again.out.count("cached") == 8  # synth and the seven stages
