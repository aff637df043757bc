"""The Megatron checks a generate runs share one interpreter (dayone.programs.megatron.batch): each check forked from
it gives the report it gives alone, a check that breaks is that check's failure only, and generate asks for the
batch before its first check."""

from __future__ import annotations

import json
import sys

import pytest
from dayone.adapters.megatron.peer import RELEASE, peer_path
from dayone.programs.megatron import batch, runner, verdicts
from dayone.spec.registry import load_spec
from dayone.synth.scale import scaled_spec

CHECKS = ["verify", "miles", "megatron-bridge"]


@pytest.mark.skipif(not (peer_path() / RELEASE).is_dir(), reason="the megatron peer is not installed")
def test_a_batch_reports_what_each_check_reports_alone():
    spec = scaled_spec(load_spec("kimi-k3"), "tiny")
    together = runner._run(spec, CHECKS)
    for check in CHECKS:
        alone = runner._run(spec, [check])[check]
        assert alone["status"] == "pass", alone["failures"]
        assert together[check] == alone, check


PLANTED = """
import json, sys
def main():
    if sys.argv[1] == "break":
        raise RuntimeError("planted in the check")
    print("log line before the report")
    print(json.dumps({"failures": [], "argv": sys.argv[1:]}))
"""


@pytest.fixture
def planted_check(tmp_path, monkeypatch):
    (tmp_path / "planted_check.py").write_text(PLANTED)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(batch.PROGRAMS, "planted", "planted_check")
    yield tmp_path
    sys.modules.pop("planted_check", None)


def test_a_check_that_breaks_is_its_own_failure(planted_check):
    out, err = planted_check / "broken.out", planted_check / "broken.err"
    assert batch.run_forked("planted", ["break"], out, err) == 1
    assert out.read_text() == "" and "RuntimeError: planted in the check" in err.read_text()
    report = runner._report("planted_check", 1, out.read_text(), err.read_text())
    assert report["status"] == "fail" and "RuntimeError: planted in the check" in report["failures"][0]
    # the next check of the batch runs in its own fork, untouched
    out, err = planted_check / "fine.out", planted_check / "fine.err"
    assert batch.run_forked("planted", ["fine", "x"], out, err) == 0
    assert json.loads(out.read_text().splitlines()[-1]) == {"failures": [], "argv": ["fine", "x"]}


def test_generate_plans_the_batch_before_its_first_check(tmp_path, monkeypatch):
    calls = []
    # A folder of its own for kept reports: a pass another test kept would skip the batch, and this test's made-up
    # passes must not be kept where a real generate would reuse them.
    monkeypatch.setattr(verdicts, "folder", lambda: tmp_path / "kept")
    monkeypatch.setattr(runner, "_REUSED", set())

    def run(spec, checks, timeout=900):
        calls.append(list(checks))
        return {check: {"status": "pass", "failures": [], "check": check} for check in checks}

    monkeypatch.setattr(runner, "_run", run)
    monkeypatch.setattr(runner, "_DONE", {})
    monkeypatch.setattr(runner, "_PLANNED", {})
    planned = scaled_spec(load_spec("kimi-k3"), "tiny")
    runner.plan_checks(planned, ("sglang", "miles", "megatron-bridge"))
    assert runner.megatron_checks(planned)["check"] == "verify"
    assert runner.adapter_checks(planned, "miles")["check"] == "miles"
    assert runner.adapter_checks(planned, "megatron-bridge")["check"] == "megatron-bridge"
    assert calls == [CHECKS]  # one interpreter for the three
    # a spec no generate planned: each check on its own, the model check once
    other = scaled_spec(load_spec("kimi-linear-48b-a3b"), "tiny")
    runner.adapter_checks(other, "miles")
    runner.megatron_checks(other)
    runner.megatron_checks(other)
    assert calls[1:] == [["miles"], ["verify"]]
