"""The `conform` stage of `integrate run`: one report per engine target with the levels for the dashboard, and the
whole conform.json beside it (the vLLM report of the shipped-spec session run is reused: no extra vLLM run)."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from dayone.checkpoint.reader import open_local
from dayone.conform import driver
from dayone.conform.results import Level
from dayone.run import stages
from dayone.run.outputs import GenerateOutput


def test_conform_stage_writes_a_report_per_engine_target(shipped, tmp_path, monkeypatch):
    spec, checkpoint, _, report = shipped
    calls = []

    def conform_target(target, adapter, ckpt, spec_arg, world_sizes=(1, 2), keep=None, references=None):
        calls.append((target, adapter.name))
        if target == "vllm":
            return report.model_copy(deep=True)
        return driver.not_run_report(target, world_sizes, "the sglang peer environment is not installed (test)")

    monkeypatch.setattr(driver, "conform_target", conform_target)
    ctx = stages.RunContext(open_local(checkpoint), spec, tmp_path, datetime(2026, 1, 1, tzinfo=UTC),
                            ("sglang", "vllm", "miles"), ("sm_90",))  # fmt: skip
    workdir = tmp_path / "work"
    workdir.mkdir()
    adapters = {t: tmp_path / "generate" / t for t in ctx.targets}
    result = stages.conform_stage(ctx).run(workdir, {"generate": GenerateOutput(adapters=adapters)})
    assert calls == [("sglang", "sglang"), ("vllm", "vllm")]  # engines only
    assert result.output.runs == {t: workdir / f"conform-{t}.json" for t in ("sglang", "vllm")}
    assert result.output.held == {}  # sglang not run and vllm passed: nothing held back
    assert result.status == "not run"  # sglang not run here, vllm passed: neither a failure
    written = json.loads((workdir / "report-conform-vllm.json").read_text())
    assert written["status"] == "pass" and written["target"] == "vllm"
    assert [lv["level"] for lv in written["details"]["levels"]][-1] == "forward"
    assert "seconds" not in json.loads((workdir / "conform-vllm.json").read_text())["runs"][0]
    sglang = json.loads((workdir / "report-conform-sglang.json").read_text())
    assert sglang["status"] == "not run" and "not installed" in sglang["details"]["levels"][0]["reason"]


def test_conform_stage_summary_names_the_levels_not_run(tmp_path, monkeypatch):
    """No level failed but forward did not run (no GPU) and ws2 stopped after built: the stage is partial in
    report.json, never a plain pass, and its summary names the first level not run with its world size."""
    from types import SimpleNamespace

    from dayone.spec.registry import load_spec

    def conform_target(target, adapter, ckpt, spec_arg, world_sizes=(1, 2), keep=None, references=None):
        report = driver.not_run_report(target, world_sizes, "needs a GPU (test)")
        for run in report.runs:
            for level in ("discovered", "accepted", "built") + (("loaded",) if run.world_size == 1 else ()):
                run.levels[level] = Level(status="pass", detail="ok")
        return report

    monkeypatch.setattr(driver, "conform_target", conform_target)
    ctx = stages.RunContext(SimpleNamespace(root=tmp_path), load_spec("kimi-linear-48b-a3b"), tmp_path,
                            datetime(2026, 1, 1, tzinfo=UTC), ("vllm",), ("sm_90",))  # fmt: skip
    workdir = tmp_path / "work"
    workdir.mkdir()
    result = stages.conform_stage(ctx).run(workdir, {"generate": GenerateOutput(adapters={"vllm": tmp_path / "vllm"})})
    assert result.status == "partial"  # nothing failed, yet levels were left not run
    assert result.summary == "vllm: ws1 loaded, ws2 built (partial: loaded not run, world size 2: needs a GPU (test))"
    written = json.loads((workdir / "report-conform-vllm.json").read_text())
    assert [lv["status"] for lv in written["details"]["levels"]] == ["pass"] * 3 + ["not run"] * 2
