"""A partial stage (all this machine can do, nothing failed, some work left not run) is never reported as pass, yet
the run treats it as done: its dependants run, it is reused on a rerun, and the run's report stays ok."""

from __future__ import annotations

from dayone.run.runner import FAIL, PARTIAL, PASS, Stage, StageResult, run_stages


def test_partial_is_done_but_not_pass(tmp_path):
    calls = []

    def stage(name, status, after=()):
        def run(workdir, upstream):
            calls.append(name)
            return StageResult(status, f"{name} {status}")

        run.__module__ = "dayone.run.runner"  # a stage's key digests the module that defines it: one dayone has
        return Stage(name, dict, run, after=after)

    stages = [stage("probe", PARTIAL), stage("package", PASS, after=("probe",)), stage("broken", FAIL)]
    first = run_stages(stages, tmp_path, "0")
    assert {n: r.status for n, r in first.items()} == {"probe": PARTIAL, "package": PASS, "broken": FAIL}
    again = run_stages(stages, tmp_path, "0")
    assert calls == ["probe", "package", "broken", "broken"]  # partial and pass reused, the failure retried
    assert again["probe"].status == PARTIAL and again["probe"].cached
