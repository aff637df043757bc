"""A passing Megatron check is kept and not run again for the same inputs (dayone.programs.megatron.verdicts); any
change of the spec, the code, the thread count or the peer's releases runs it again, and a failure is never kept."""

from __future__ import annotations

import json

import pytest
from dayone.adapters.megatron.peer import RELEASE
from dayone.programs.megatron import runner, verdicts
from dayone.spec.registry import load_spec
from dayone.synth.scale import scaled_spec


@pytest.fixture
def harness(tmp_path, monkeypatch):
    """A kept-reports folder and a peer of this test's own; `_run` replaced by a recorder whose reports the test sets."""
    peer = tmp_path / "peer"
    (peer / RELEASE).mkdir(parents=True)
    monkeypatch.setattr(runner, "peer_path", lambda: peer)
    monkeypatch.setattr(verdicts, "folder", lambda: tmp_path / "kept")
    monkeypatch.setattr(runner, "_DONE", {})
    monkeypatch.setattr(runner, "_PLANNED", {})
    monkeypatch.setattr(runner, "_REUSED", set())
    ran: list[list[str]] = []
    status = {"value": "pass"}

    def run(spec, checks, timeout=900):
        ran.append(list(checks))
        failures = [] if status["value"] == "pass" else ["planted"]
        return {c: {"status": status["value"], "model": c, "failures": failures} for c in checks}  # not sorted

    monkeypatch.setattr(runner, "_run", run)

    def fresh_process():  # what a new `integrate` starts with
        monkeypatch.setattr(runner, "_DONE", {})
        monkeypatch.setattr(runner, "_REUSED", set())

    return ran, status, fresh_process, peer


SPEC = scaled_spec(load_spec("kimi-k3"), "tiny")


def test_a_pass_is_run_once_and_reused_by_the_next_process(harness):
    ran, _, fresh_process, _ = harness
    runner.plan_checks(SPEC, ["miles"])
    first = runner.megatron_checks(SPEC)
    assert first["status"] == "pass"
    assert ran == [["verify", "miles"]] and runner.reused(SPEC, ["verify", "miles"]) == []
    fresh_process()
    # the same report, key order included: the reports written from it are compared byte for byte across runs
    assert json.dumps(runner.megatron_checks(SPEC)) == json.dumps(first)
    assert runner.adapter_checks(SPEC, "miles")["status"] == "pass"
    assert ran == [["verify", "miles"]]  # nothing ran the second time
    assert runner.reused(SPEC, ["verify", "miles"]) == ["verify", "miles"]


def test_a_failure_is_not_kept(harness):
    ran, status, fresh_process, _ = harness
    status["value"] = "fail"
    assert runner.megatron_checks(SPEC)["status"] == "fail"
    fresh_process()
    assert runner.megatron_checks(SPEC)["status"] == "fail"
    assert ran == [["verify"], ["verify"]]


@pytest.mark.parametrize("change", ["spec", "threads", "peer", "code"])
def test_any_input_changed_runs_the_check_again(harness, monkeypatch, change):
    ran, _, fresh_process, peer = harness
    runner.megatron_checks(SPEC)
    fresh_process()
    spec = SPEC
    if change == "spec":
        spec = scaled_spec(load_spec("kimi-k3"), "tiny", layers=5)
    elif change == "threads":
        monkeypatch.setenv("OMP_NUM_THREADS", "7")
    elif change == "peer":
        (peer / "megatron_bridge-9.9.dist-info").mkdir()
    else:
        import dayone.run.code

        monkeypatch.setattr(dayone.run.code, "code_digest", lambda entries, follow=True: "another tree")
    runner.megatron_checks(spec)
    assert ran == [["verify"], ["verify"]]


def test_the_code_digest_covers_the_programs_templates_and_adapters():
    from dayone.run.code import code_files

    files = code_files(verdicts.CODE)
    assert "dayone.programs.megatron.verify" in files and "dayone.programs.megatron.check_miles" in files
    assert any(name.startswith("dayone.templates/miles/") for name in files)
    assert any(name.startswith("dayone.adapters/megatron/") for name in files)


def test_an_unreadable_kept_report_is_ignored(harness):
    ran, _, fresh_process, _ = harness
    runner.megatron_checks(SPEC)
    for path in verdicts.folder().iterdir():
        path.write_text("{not json")
    fresh_process()
    assert runner.megatron_checks(SPEC)["status"] == "pass"
    assert ran == [["verify"], ["verify"]]
