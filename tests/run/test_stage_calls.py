"""`integrate run`'s stages call the library with the run's typed objects (its open Checkpoint, its ModelSpec), not
with paths and spec files read and validated again; process-wide settings (TRITON_INTERPRET) are made at the
command's entry, never inside a stage."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace

import pytest
from click.testing import CliRunner
from dayone.checkpoint import open_checkpoint
from dayone.checkpoint.spec_source import spec_for_checkpoint
from dayone.run import stages as S
from dayone.run.outputs import GenerateOutput
from dayone.spec.registry import load_spec
from dayone.synth import scaled_spec, write_synthetic
from reparse_guard import forbid_reparsing

CREATED = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("ckpt") / "kimi-k3-tiny"
    write_synthetic(scaled_spec(load_spec("kimi-k3"), "tiny", 4), path, seed=0, num_shards=2)
    return path


def context(checkpoint: Path, out: Path, name: str | None = None, targets=("sglang",)) -> S.RunContext:
    ckpt = open_checkpoint(str(checkpoint), read_headers=False)
    spec = spec_for_checkpoint(ckpt, None)
    if name is not None:
        spec = spec.model_copy(update={"name": name})
    return S.RunContext(ckpt, spec, out, CREATED, targets, ("sm_90",))


def generated(tmp_path: Path, ctx: S.RunContext) -> dict:
    """What the generate stage hands conform: a folder per target (empty: the stages here do not get that far)."""
    adapters = {t: tmp_path / "generate" / t for t in ctx.targets}
    for folder in adapters.values():
        folder.mkdir(parents=True)
    return {"generate": GenerateOutput(adapters=adapters)}


def test_validate_stage_judges_the_runs_own_checkpoint_and_spec(tiny, tmp_path, monkeypatch):
    # No OUT/stages/spec/spec.yaml exists, and the spec carries a name config.json cannot give: the stage can only
    # pass, under that name, if it hands validate the RunContext's objects.
    ctx = context(tiny, tmp_path / "out", name="renamed-stand-in", targets=("sglang", "miles"))
    workdir = tmp_path / "work"
    workdir.mkdir()
    called = forbid_reparsing(monkeypatch)  # and it may not open the checkpoint or make a spec again
    result = S.validate_stage(ctx).run(workdir, {})
    assert not called and result.status == "pass", (called, result.summary)
    report = json.loads((workdir / "report-validate.json").read_text())
    assert report["spec"] == "renamed-stand-in"
    assert report["created"].startswith("2026-01-02T03:04:05")
    assert report["details"]["checkpoint"] == ctx.checkpoint_identity
    assert "seconds" not in report["details"]
    assert not (tmp_path / "out").exists()
    # an engine's cell says why its own numerics were not run; a training target's has no validate report (its
    # Megatron model's numerics are generate --check's), rather than an engine's reason that is not its own
    engine = json.loads((workdir / "report-validate-sglang.json").read_text())
    assert engine["status"] == "not run" and "engine's own numerics" in engine["details"]["reason"]
    assert not list(workdir.glob("report-validate-miles*"))


@pytest.mark.parametrize("stage", ["spec", "coverage", "plan", "validate"])
def test_stages_read_nothing_again(stage, tiny, tmp_path, monkeypatch):
    """Each stage works from the RunContext's objects: with every path- and name-based loader raising, it runs."""
    ctx = context(tiny, tmp_path / "out")
    workdir = tmp_path / "work"
    workdir.mkdir()
    called = forbid_reparsing(monkeypatch)
    result = getattr(S, f"{stage}_stage")(ctx).run(workdir, {})
    assert not called, called
    assert result.status == "pass", result.summary


def test_validate_returns_a_typed_report_of_the_objects_it_is_given(tiny, monkeypatch):
    """validate() takes the open Checkpoint and the ModelSpec (never a path or a spec name to read again) and returns
    a Verdict holding the dashboard Report itself, not a dict for the caller to parse."""
    from dayone.reports.model import Report
    from dayone.validate import Options, Verdict, validate

    checkpoint = open_checkpoint(str(tiny))
    spec = spec_for_checkpoint(checkpoint, None).model_copy(update={"name": "given-spec"})
    called = forbid_reparsing(monkeypatch)
    verdict = validate(checkpoint, spec, Options(reference="naive", tokens="1,2,3,4", reload_check=False))
    assert not called, called
    assert isinstance(verdict, Verdict) and isinstance(verdict.report, Report)
    assert (verdict.report.stage, verdict.report.spec, verdict.report.target) == ("validate", "given-spec", "reference")
    assert verdict.status == verdict.report.status == "pass", verdict.report.details["first_failure"]
    assert verdict.report.details["checkpoint"] == str(tiny)  # the Checkpoint's own source, as opened


def test_compile_stage_leaves_the_process_environment_alone(tiny, tmp_path, monkeypatch):
    import dayone.compile_stage
    import dayone.kernels.aot

    seen = []
    # one kernel: the stage compiles kernel by kernel (a progress step each), so it must reach the compiler once
    one = SimpleNamespace(kernel="situ")
    monkeypatch.setattr(dayone.compile_stage, "specializations_for", lambda spec: [one])
    monkeypatch.setattr(
        dayone.kernels.aot, "compile_specializations", lambda specs, archs, cache: seen.append(os.environ.copy()) or []
    )
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    ctx = context(tiny, tmp_path / "out")
    workdir = tmp_path / "work"
    workdir.mkdir()
    assert S.compile_stage(ctx).run(workdir, {}).status == "pass"
    assert seen and seen[0].get("TRITON_INTERPRET") == "1"  # the stage compiled in the environment it was given
    assert os.environ.get("TRITON_INTERPRET") == "1"


@pytest.mark.parametrize("command", ["compile", "run"])
def test_the_commands_that_compile_drop_the_interpreter_at_their_entry(command, tmp_path, monkeypatch):
    from dayone.commands import compile_cmd, run_cmd

    seen = []

    def record(*args, **kwargs):
        seen.append(os.environ.get("TRITON_INTERPRET"))
        if command == "compile":  # _build(spec, archs, out, ...) leaves the cubin folder, however few kernels
            (args[2] / "cubin").mkdir(parents=True)
            return [], []
        return {"ok": True}, {}

    monkeypatch.setattr(compile_cmd, "_build", record)
    monkeypatch.setattr(run_cmd, "_run", record)
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    args = ["kimi-k3", "-o", tmp_path / "kernels"] if command == "compile" else ["--demo", "-o", tmp_path / "run"]
    main = compile_cmd.COMMAND if command == "compile" else run_cmd.COMMAND
    result = CliRunner().invoke(main, [str(a) for a in args])
    assert result.exit_code == 0, result.output + repr(result.exception)
    assert seen == [None]
    assert os.environ.get("TRITON_INTERPRET") == "1"  # given back when the command ends (an in-process caller's)


@pytest.mark.parametrize("command", ["validate", "run"])
def test_the_commands_that_validate_choose_transformers_torch_path_at_their_entry(command, tiny, tmp_path, monkeypatch):
    """USE_HUB_KERNELS=NO (transformers' own torch path is the oracle, not hub kernels) is set by `validate` and `run`
    before any work, as their entry parses CHECKPOINT once into the objects the library gets; it is given back when
    the command ends, and an explicit setting is kept."""
    import dayone.validate
    from dayone.checkpoint.reader import Checkpoint
    from dayone.commands import run_cmd, validate_cmd
    from dayone.spec.schema import ModelSpec
    from dayone.validate import Verdict

    seen = []

    def validating(checkpoint, spec, options):
        seen.append(
            (os.environ.get("USE_HUB_KERNELS"), isinstance(checkpoint, Checkpoint), isinstance(spec, ModelSpec))
        )
        return Verdict("pass")

    def running(*args, **kwargs):
        seen.append((os.environ.get("USE_HUB_KERNELS"), True, True))
        return {"ok": True}, {}

    monkeypatch.setattr(dayone.validate, "validate", validating)
    monkeypatch.setattr(run_cmd, "_run", running)
    main = validate_cmd.COMMAND if command == "validate" else run_cmd.COMMAND
    args = [str(tiny)] if command == "validate" else [str(tiny), "-o", str(tmp_path / "run")]
    monkeypatch.delenv("USE_HUB_KERNELS", raising=False)
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output + repr(result.exception)
    assert seen == [("NO", True, True)]
    assert "USE_HUB_KERNELS" not in os.environ  # given back when the command ends (an in-process caller's)
    monkeypatch.setenv("USE_HUB_KERNELS", "YES")  # the user's own choice stands
    assert CliRunner().invoke(main, args).exit_code == 0
    assert seen[-1][0] == "YES" and os.environ["USE_HUB_KERNELS"] == "YES"


def test_conform_without_its_peers_says_which_is_missing_and_what_installs_it(tiny, tmp_path, monkeypatch):
    """No peer environment: the stage is "not run" (never a pass), and its summary names each missing peer with a
    command that exists in this repository, instead of "ws1 none, ws2 none"."""
    monkeypatch.setenv("DAYONE_PEERS", str(tmp_path / "no-peers"))
    ctx = context(tiny, tmp_path / "out", targets=("sglang", "vllm", "miles"))
    workdir = tmp_path / "work"
    workdir.mkdir()
    result = S.conform_stage(ctx).run(workdir, generated(tmp_path, ctx))
    assert result.status == "not run", result.summary
    lines = result.summary.split("; ")
    assert [line.split(":")[0] for line in lines] == ["sglang", "vllm"]  # the engines only: miles has no conform
    root = Path(__file__).resolve().parents[2]
    for engine, line in zip(("sglang", "vllm"), lines, strict=True):
        assert f"the {engine} peer environment is not installed" in line and "none" not in line, line
        script = line.split("`bash ")[1].split("`")[0]
        assert (root / script).is_file() and engine in script, line  # a command the user can run as written
        assert "world size" not in line  # the same reason at every world size is said once


def test_the_summary_shows_the_time_of_a_stage_that_ran_whatever_its_status(capsys):
    """A stage that ran and ended "not run" (conform without its peers) took time: the summary shows it; "-" is
    for a stage that never started."""
    from dayone.commands.run_cmd import _summary
    from dayone.run.runner import StageResult

    results = {
        "conform": StageResult("not run", "sglang: not run: no peer", seconds=4.25),
        "package": StageResult("not run", "needs validate, which did not pass"),
        "spec": StageResult("pass", "ok", cached=True),
    }
    _summary(results, Path.cwd() / "out")
    rows = {line.split("│")[1].strip(): line.split("│")[3].strip() for line in capsys.readouterr().out.splitlines()
            if line.count("│") >= 4}  # fmt: skip
    assert rows == {"conform": "4.2 s", "package": "-", "spec": "cached"}


def test_a_stage_that_ran_and_ended_not_run_keeps_its_own_reports(tiny, tmp_path, monkeypatch):
    """conform without its peers ends "not run" after running: OUT/reports and the dashboard carry its per-engine
    reports (the missing peer and what installs it), not a stand-in with the stage's one-line summary; a stage that
    never started gets the stand-in even where an earlier run left its folder."""
    from dayone.commands.run_cmd import _finish
    from dayone.run.runner import StageResult

    monkeypatch.setenv("DAYONE_PEERS", str(tmp_path / "no-peers"))
    out = tmp_path / "out"
    ctx = context(tiny, out, targets=("sglang",))
    conform = out / "stages" / "conform"
    conform.mkdir(parents=True)
    ran = S.conform_stage(ctx).run(conform, generated(tmp_path, ctx))
    ran.seconds = 0.5
    stale = out / "stages" / "validate"  # an earlier run's folder: this run's validate never started
    stale.mkdir()
    ctx.report(stale, "validate", "pass", {"note": "an earlier run"}, target="sglang")
    results = {"conform": ran, "validate": StageResult("not run", "needs compile, which did not pass")}
    _finish(out, CREATED, ctx, results, "h200", 1)
    conform_report = json.loads((out / "reports" / "report-conform-sglang.json").read_text())
    assert conform_report["status"] == "not run"
    assert conform_report["details"]["levels"][0]["reason"].endswith(
        "the sglang peer environment is not installed: `bash .ci/setup.d/11-sglang.sh` installs it "
        "(`bash .ci/setup` installs every peer)"
    )
    validate_report = json.loads((out / "reports" / "report-validate-sglang.json").read_text())
    assert validate_report["details"] == {"reason": "needs compile, which did not pass"}
