"""The generated vLLM adapters judged by vLLM 0.33.0 itself (its peer environment, .ci/setup.d/10-vllm.sh): found
through the plugin entry point, accepted by ModelConfig, built under tensor parallelism 1 and 2 on gloo, and loaded
by vLLM's own loader into parameters bitwise equal to dayone's reference reading, for both shipped specs."""

from __future__ import annotations

import pytest
from conftest import SPECS
from dayone.adapters.targets import common
from dayone.conform.driver import cell_details


@pytest.mark.parametrize("name", SPECS)
def test_levels_a_to_d_pass_at_world_size_1_and_2(shipped, name):
    report = shipped[name][3]
    assert report.version == "0.33.0"
    assert [run.world_size for run in report.runs] == [1, 2]
    for run in report.runs:
        for level in ("discovered", "accepted", "built", "loaded"):
            entry = run.levels[level]
            assert entry.status == "pass", f"{name} ws{run.world_size} {level}: {entry.detail}"
        assert run.levels["forward"].status == "not run"
        assert "GPU kernel" in run.levels["forward"].detail
    assert report.passed


@pytest.mark.parametrize("name", SPECS)
def test_vllm_inspects_the_model_as_hybrid_mla_with_the_checkpoint_quantization(shipped, name):
    spec, report = shipped[name][0], shipped[name][3]
    facts = report.runs[0].facts
    assert facts["class"] == f"{common.package_name(spec, 'vllm')}.model.{spec.hf.architecture}"
    assert facts["is_hybrid"] is True and facts["use_mla"] is True and facts["runner"] == "generate"
    assert facts["quantization"] == ("mxfp4" if spec.quantization is not None else None)


def test_the_mxfp4_kernel_bypass_is_reported_not_hidden(shipped):
    built = shipped["kimi-k3"][3].runs[0].levels["built"].detail
    assert "MXFP4 MoE kernel not available on the CPU" in built


def test_dashboard_cell_names_the_first_level_not_reached(shipped):
    details = cell_details(shipped["kimi-linear-48b-a3b"][3])
    levels = {lv["level"]: lv for lv in details["levels"]}
    assert [lv["status"] for lv in details["levels"]] == ["pass", "pass", "pass", "pass", "not run"]
    assert levels["forward"]["reason"].startswith("world size 1: not run on the CPU")
    assert details["summary"] == "ws1 loaded, ws2 loaded"


def test_dashboard_conform_cell_shows_the_level_reached_and_why_not_further(shipped):
    from dayone.dashboard.matrix import build_matrix
    from dayone.dashboard.reports import Report, now

    details = cell_details(shipped["kimi-k3"][3])
    status = details.pop("status")
    report = Report(stage="conform", spec="kimi-k3", target="vllm", status=status, created=now(), details=details)
    (model,) = build_matrix([report], set())
    cell = model.cell("conform", "vllm")
    assert cell.state == "partial" and cell.level == "loaded"  # forward did not run: never pass
    assert cell.reason.startswith("forward not run: world size 1: not run on the CPU")
