"""`integrate run CHECKPOINT --stand-in-for SPEC`: a small checkpoint standing in for a named spec is planned at that
spec's widths; a checkpoint of another structure is refused up front. (--demo's stand-in: tests/drill.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from checkpoints import synthesize
from cli_runner import assert_bad_input, integrate
from dayone.spec.planner import make_plan
from dayone.spec.registry import load_spec, spec_to_dict

ONE_THREAD = {"OMP_NUM_THREADS": "1"}
# Only the spec and the plan: the stages that read the shapes at length run in tests/drill.
ONLY_PLAN = [arg for stage in ("generate", "conform", "compile", "validate", "package") for arg in ("--skip", stage)]


@pytest.fixture(scope="module")
def tiny_k3(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("stand-in") / "k3-tiny"
    return synthesize(path, "kimi-k3", "--scale", "tiny", "--layers", "5", "--shards", "2")


def test_plan_at_the_named_specs_widths(tiny_k3, tmp_path):
    out = tmp_path / "out"
    result = integrate("run", tiny_k3, "--stand-in-for", "kimi-k3", *ONLY_PLAN, "--json", "-o", out, env=ONE_THREAD)
    assert result.code == 0, result.err
    plan = json.loads((out / "stages" / "plan" / "plan.json").read_text())
    assert plan == json.loads(json.dumps(make_plan(load_spec("kimi-k3"), "h200", None).as_dict()))
    summary = {s["stage"]: s["summary"] for s in json.loads(result.out)["stages"]}
    # named after the model (kimi_k3 and its size), not the folder (k3-tiny), nor as the shipped kimi-k3
    name = summary["spec"].split(":")[0]
    assert "at kimi-k3's widths" in summary["plan"] and name.startswith("kimi-k3-") and "tiny" not in name
    # the spec report names the model stood in for: the dashboard plans it too (tests/dashboard)
    spec_report = json.loads((out / "reports" / "report-spec.json").read_text())
    assert spec_report["details"]["stands_in_for"] == spec_to_dict(load_spec("kimi-k3"))
    assert spec_report["details"]["spec"]["name"] == name
    # without --stand-in-for the plan is the checkpoint's own (a tiny model): the option is what changed it
    own = tmp_path / "own"
    assert integrate("run", tiny_k3, *ONLY_PLAN, "-o", own, env=ONE_THREAD).code == 0
    assert json.loads((own / "stages" / "plan" / "plan.json").read_text()) != plan
    assert "stands_in_for" not in json.loads((own / "reports" / "report-spec.json").read_text())["details"]


def test_another_structure_is_refused_up_front(tiny_k3, tmp_path):
    result = integrate("run", tiny_k3, "--stand-in-for", "kimi-linear-48b-a3b", "-o", tmp_path / "out", env=ONE_THREAD)
    assert_bad_input(result, "not a stand-in of kimi-linear-48b-a3b", "hf.model_type")
    assert not (tmp_path / "out" / "stages").exists()


def test_scale_is_the_demos(tiny_k3, tmp_path):
    result = integrate("run", tiny_k3, "--scale", "faithful", "-o", tmp_path / "out", env=ONE_THREAD)
    assert_bad_input(result, "--scale")
