"""`integrate run`: every stage, resumable after kill -9 with byte-identical outputs, and a rerun that reuses all."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cli_runner import Result, integrate
from dayone.run import stages as run_stages
from readme_demo import fresh_checkout, quiet_env

# Reproducible report timestamps (the reproducible-builds convention): two runs can then be compared byte for byte.
EPOCH = {"SOURCE_DATE_EPOCH": "1700000000"}
SCRATCH = {"logs", "cache", ".lock"}  # timings, the kernel cache and who holds the lock: not outputs
# conform runs the engines in their peer environments (minutes) and has its own tests (tests/conform): the runs here,
# which test the runner, skip it; the README command's test runs it, as written.
SKIP = ("--skip", "conform") if hasattr(run_stages, "conform_stage") else ()


@pytest.fixture(scope="module")
def checkout(tmp_path_factory) -> Path:
    """This tree as a fresh checkout with its own venv: the runs below see one version of the code throughout (stage
    keys hold the code's digest, so an edit to the shared tree between two runs would rightly rerun stages)."""
    return fresh_checkout(tmp_path_factory.mktemp("checkout") / "dayone")


def in_checkout(root: Path, *args, env: dict | None = None) -> Result:
    proc = subprocess.run([str(root / ".venv" / "bin" / "python"), "-m", "dayone", *map(str, args)],
                          env=quiet_env(**(env or {})), capture_output=True, text=True, timeout=900, check=False)  # fmt: skip
    return Result(proc.returncode, proc.stdout, proc.stderr)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory, checkout) -> Path:
    """A tiny K3 with 13 layers: the snapshot at layer 12 is crossed, MXFP4 experts, vision passthrough."""
    path = tmp_path_factory.mktemp("ckpt") / "kimi-k3-mini"
    result = in_checkout(checkout, "synth", "kimi-k3", "--scale", "tiny", "--layers", "13", "-o", path)
    assert result.code == 0, result.err
    return path


def run_args(checkpoint: Path, out: Path) -> list[str]:
    return ["run", str(checkpoint), "--target", "sglang", "--target", "miles", "--arch", "sm_90", *SKIP, "-o", str(out)]


def outputs(out: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(out)): p.read_bytes()
        for p in sorted(out.rglob("*"))
        if p.is_file() and p.relative_to(out).parts[0] not in SCRATCH
    }


@pytest.fixture(scope="module")
def uninterrupted(checkpoint, checkout, tmp_path_factory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("run-a") / "out"
    result = in_checkout(checkout, *run_args(checkpoint, out), "--json", env=EPOCH)
    assert result.code == 0, result.out[-2000:] + result.err[-2000:]
    return out, json.loads(result.out)


def test_every_stage_passes(uninterrupted):
    out, report = uninterrupted
    assert report["ok"]
    names = [s["stage"] for s in report["stages"]]
    assert names[:4] == ["spec", "coverage", "plan", "generate"] and names[-1] == "package"
    assert (out / "site" / "index.html").is_file()
    dist = out / "stages" / "package" / "dist"
    assert {p.suffix for p in dist.iterdir()} >= {".whl", ".gz", ".md"} and (dist / "SHA256SUMS").is_file()
    assert json.loads((out / "report.json").read_text()) == report


def test_rerun_with_nothing_changed_reuses_every_stage(checkpoint, checkout, uninterrupted):
    out, _ = uninterrupted
    before = outputs(out)
    result = in_checkout(checkout, *run_args(checkpoint, out), env=EPOCH)
    assert result.code == 0, result.err[-2000:]
    rows = _table(result.out)
    assert rows and all(row[1] == "cached" for s, row in rows.items() if s not in SKIP), result.out
    assert outputs(out) == before


def test_killed_runs_resume_to_identical_outputs(checkpoint, checkout, uninterrupted, tmp_path):
    """kill -9 at several moments (during synth-free stages: spec ... package), resume, compare every byte."""
    reference, _ = uninterrupted
    out = tmp_path / "out"
    python = checkout / ".venv" / "bin" / "python"
    for delay in (1.5, 4.0, 8.0):
        proc = subprocess.Popen([python, "-m", "dayone", *run_args(checkpoint, out)], env=quiet_env(**EPOCH),
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
        time.sleep(delay)
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
        proc.wait()
    result = in_checkout(checkout, *run_args(checkpoint, out), env=EPOCH)
    assert result.code == 0, result.err[-2000:]
    assert outputs(out) == outputs(reference)


def test_changed_input_reruns_only_what_depends_on_it(checkpoint, checkout, uninterrupted, tmp_path):
    out = tmp_path / "out"
    shutil.copytree(uninterrupted[0], out, symlinks=True)  # a finished run (its keys do not hold the folder)
    result = in_checkout(checkout, *run_args(checkpoint, out)[:-2], "--gpus", "2", "-o", str(out), env=EPOCH)
    lines = {line.split("│")[1].strip(): line for line in result.out.splitlines() if line.count("│") >= 4}
    assert "cached" in lines["spec"] and "cached" in lines["coverage"]
    assert "cached" not in lines["plan"]


def test_bad_input(tmp_path):
    result = integrate("run", "-o", tmp_path / "out")
    assert result.code == 2 and "CHECKPOINT or --demo" in result.err
    result = integrate("run", tmp_path / "missing", "-o", tmp_path / "out")
    assert result.code == 2 and len(result.err.strip().splitlines()) == 1


def _table(text: str) -> dict[str, list[str]]:
    """The summary table's rows: stage -> [status, time, summary]."""
    rows = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.split("│")[1:-1]]
        if len(cells) == 4 and cells[0]:
            rows[cells[0]] = cells[1:]
    return rows


def test_readme_command_from_a_fresh_clone(readme_demo):
    """The README's main command as written (relative -o, in a fresh clone, with the clone's own code): a tiny K3
    synthesised in the release format, then every stage, all green, with no third-party warning in its output;
    the rerun reuses every stage."""
    run = readme_demo
    assert run.code == 0, run.stdout[-3000:] + run.stderr[-3000:]
    report = json.loads((run.out / "report.json").read_text())
    assert report["ok"] and report["spec"] == "kimi-k3-tiny"
    names = [s["stage"] for s in report["stages"]]
    assert names[:5] == ["synth", "spec", "coverage", "plan", "generate"] and names[-1] == "package"
    assert {"compile", "validate"} <= set(names)
    # Every stage passes, conform included: both engines reach forward at world sizes 1 and 2 (ws2 by expert
    # parallelism: the tiny experts' one MXFP4 scale group per row does not split over two ranks).
    assert {s["status"] for s in report["stages"]} == {"pass"}, report["stages"]
    conform = next(s for s in report["stages"] if s["stage"] == "conform")
    assert conform["summary"] == "sglang: ws1 forward, ws2 forward; vllm: ws1 forward, ws2 forward"
    assert len(list((run.out / "stages" / "synth" / "kimi-k3-tiny").glob("model-*.safetensors"))) == 3
    dist = run.out / "stages" / "package" / "dist"
    assert len(list(dist.glob("*.whl"))) == 4 and len(list(dist.glob("*.tar.gz"))) == 4
    # Nothing was built under the clone's sources or anywhere outside OUT.
    assert not [p for p in run.clone.rglob("*.whl") if not p.is_relative_to(run.out)]
    assert (run.out / "site" / "index.html").is_file()
    assert "Warning" not in run.stdout + run.stderr and "warn" not in run.stderr.lower(), run.stderr
    start = time.perf_counter()
    again = run.integrate("run", "--demo", "-o", "out/demo")
    rerun_seconds = time.perf_counter() - start
    assert again.returncode == 0, again.stdout + again.stderr
    rows = _table(again.stdout)
    assert list(rows) == [s["stage"] for s in report["stages"]]
    assert all(row[1] == "cached" for row in rows.values()), again.stdout
    print(f"\nREADME demo: {run.seconds:.1f} s; its cached rerun: {rerun_seconds:.2f} s")


def _copy_run(run, dest: Path) -> Path:
    """A copy of the README run's checkout and OUT (with its own .venv), to change without touching the original."""
    from readme_demo import make_venv

    shutil.copytree(run.clone, dest, symlinks=True, ignore=shutil.ignore_patterns(".venv", "*.egg-info"))
    make_venv(dest)
    return dest


def _readers_of(stage: str, names) -> set[str]:
    """The stages among names that read `stage`'s outputs, directly or through another (their `after`)."""
    from dayone.run import stages as S

    after = {n: set(getattr(S, f"{n}_stage")(None).after) for n in names if n != "synth"}  # built, not run
    readers, grew = set(), True
    while grew:
        new = {n for n, deps in after.items() if deps & (readers | {stage})} - readers
        readers, grew = readers | new, bool(new)
    return readers


def test_editing_a_template_reruns_generate_and_what_reads_it_only(readme_demo, tmp_path):
    clone = _copy_run(readme_demo, tmp_path / "dayone")
    cached = readme_demo.integrate("run", "--demo", *SKIP, "-o", "out/demo", clone=clone)
    rows = _table(cached.stdout)
    # Package reads conform's value when conform made one: skipped now, it packages again, without the README run's
    # conformance evidence (an earlier run's folder is not this run's result).
    reran = {stage for stage, row in rows.items() if row[1] != "cached" and stage not in SKIP}
    assert cached.returncode == 0 and reran == ({"package"} if SKIP else set()), cached.stdout
    assert not list((clone / "out" / "demo" / "stages" / "package" / "dist").glob("*-report-conform-*"))
    template = clone / "templates" / "sglang" / "model.py.j2"
    template.write_text(template.read_text() + "{# edited: renders nothing, but the template changed #}\n")
    edited = readme_demo.integrate("run", "--demo", *SKIP, "-o", "out/demo", clone=clone)
    assert edited.returncode == 0, edited.stdout + edited.stderr
    rows = _table(edited.stdout)
    rerun = {stage for stage, row in rows.items() if row[1] != "cached" and stage not in SKIP}
    assert rerun == {"generate"} | (_readers_of("generate", rows) - set(SKIP)), edited.stdout
    assert {"spec", "coverage", "plan", "compile", "validate"}.isdisjoint(rerun)


def test_a_stage_failed_by_its_environment_passes_once_it_is_fixed(readme_demo, tmp_path):
    """publish without GITHUB_TOKEN fails; the rerun with a token retries it (a failed stage is never reused, and
    the key holds whether a token is set, never the token) and reuses every other stage."""
    sys.path.insert(0, str(Path(__file__).parents[1] / "release"))
    from fake_github import FakeGitHub

    clone = _copy_run(readme_demo, tmp_path / "dayone")
    with FakeGitHub("acme", "kimi") as server:
        args = ("run", "--demo", *SKIP, "-o", "out/demo", "--publish", "acme/kimi", "--tag", "v0.1.0", "--api-url",
                server.url)  # fmt: skip
        first = readme_demo.integrate(*args, env={"GITHUB_TOKEN": ""}, clone=clone)
        assert first.returncode == 1 and _table(first.stdout)["publish"][0] == "fail", first.stdout
        assert "GITHUB_TOKEN is not set" in first.stdout and not server.writes()
        second = readme_demo.integrate(*args, env={"GITHUB_TOKEN": "ghs_test_token_0123456789"}, clone=clone)
        assert second.returncode == 0, second.stdout + second.stderr
        rows = _table(second.stdout)
        assert rows["publish"][0] == "pass" and rows["publish"][1] != "cached"
        assert all(row[1] == "cached" for stage, row in rows.items() if stage not in ("publish", *SKIP)), second.stdout
        assert server.writes()
    stage = json.loads((clone / "out" / "demo" / "stages" / "publish" / "stage.json").read_text())
    assert "ghs_test_token" not in json.dumps(stage)


def test_a_failing_stage_leaves_the_report_and_site_and_independent_stages_run(readme_demo, tmp_path):
    """A truncated shard: coverage and validate fail with the reader's message, the stages that do not read the
    weights still run and pass, package (which needs them) is "not run" and says why; report.json and the
    dashboard are written; exit 1."""
    ckpt = tmp_path / "truncated"
    made = readme_demo.integrate("synth", "kimi-k3", "--scale", "tiny", "--layers", "4", "-o", ckpt)
    assert made.returncode == 0, made.stderr
    shard = ckpt / "model-00001-of-00096.safetensors"
    os.truncate(shard, shard.stat().st_size - 100)
    out = tmp_path / "out"
    result = readme_demo.integrate("run", ckpt, "--target", "sglang", "--arch", "sm_90", *SKIP, "-o", out)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    report = json.loads((out / "report.json").read_text())
    status = {s["stage"]: (s["status"], s["summary"]) for s in report["stages"]}
    assert {k: status[k][0] for k in ("spec", "coverage", "plan", "generate", "compile", "validate", "package")} == {
        "spec": "pass", "coverage": "fail", "plan": "pass", "generate": "pass", "compile": "pass",
        "validate": "fail", "package": "not run",
    }  # fmt: skip
    assert "truncated" in status["coverage"][1] and "truncated" in status["validate"][1]
    assert status["package"][1] == "needs coverage, validate, which did not pass"
    index = (out / "site" / "index.html").read_text()
    # each cell's reason is text beside its state (tests/dashboard reads it in the browser)
    assert re.search(r'data-stage="package" data-target="sglang" data-state="not run">not run</a>\s*'
                     r'<span class="why">needs coverage, validate', index)  # fmt: skip
    assert re.search(r'data-stage="coverage" data-target="" data-state="fail">fail</a>\s*<span class="why">[^<]*truncated',
                     index)  # fmt: skip
    # The retry after the checkpoint is repaired: the failed stages run again; the passed ones are reused.
    shutil.rmtree(ckpt)
    assert readme_demo.integrate("synth", "kimi-k3", "--scale", "tiny", "--layers", "4", "-o", ckpt).returncode == 0
    fixed = readme_demo.integrate("run", ckpt, "--target", "sglang", "--arch", "sm_90", *SKIP, "-o", out)
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    rows = _table(fixed.stdout)
    cached = {s for s, r in rows.items() if r[1] == "cached"}
    assert cached >= {"spec", "plan", "generate", "compile"} and cached.isdisjoint({"coverage", "validate"}), (
        fixed.stdout
    )


HOLD_LOCK = """
import sys, time
from dayone.run.lock import hold
with hold(sys.argv[1]):
    print("held", flush=True)
    time.sleep(600)
"""


def test_two_runs_into_one_out(readme_demo, tmp_path):
    """A second run while one holds OUT exits 2 with one line naming it; once the holder is killed (kill -9: the
    lock file stays behind), the next run goes ahead."""
    clone = _copy_run(readme_demo, tmp_path / "dayone")
    out = clone / "out" / "demo"
    python = clone / ".venv" / "bin" / "python"
    holder = subprocess.Popen([python, "-c", HOLD_LOCK, out], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        second = readme_demo.integrate("run", "--demo", *SKIP, "-o", "out/demo", clone=clone)
        lines = [line for line in second.stderr.splitlines() if line.strip()]
        assert second.returncode == 2 and len(lines) == 1, second.stderr
        assert f"pid {holder.pid}" in lines[0] and "in use" in lines[0]
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    assert (out / ".lock").is_file()  # stale: its holder is gone
    third = readme_demo.integrate("run", "--demo", *SKIP, "-o", "out/demo", clone=clone)
    assert third.returncode == 0, third.stdout + third.stderr
