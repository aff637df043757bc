"""Off a terminal (CI, `| tee`, a file) `integrate run` shows a timestamped line as each stage starts and ends, and
validate one per layer, as they happen; nothing is cut to 80 columns. Read from the README's run (tests/readme_demo.py),
which runs off a terminal at the default width, every stage of the 93-layer demo."""

from __future__ import annotations

import json
import re

from cli_runner import integrate

STAMP = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ"


def test_run_prints_a_line_per_stage_start_and_end_and_per_validate_layer(readme_demo):
    assert readme_demo.code == 0, readme_demo.stderr[-2000:]
    lines = readme_demo.stderr.splitlines()
    assert all(re.match(STAMP + " ", line) for line in lines), lines[:5]
    said = [line.split(" ", 2)[2] for line in lines]
    stages = [s["stage"] for s in json.loads((readme_demo.out / "report.json").read_text())["stages"]]
    for stage in stages:  # started, then ended with its status, in the run's order
        start = said.index(f"{stage}: started")
        assert re.match(rf"{stage}: (pass|fail|not run|partial)", said[start + 1 + _steps(said, start)])
    layers = [s for s in said if s.startswith("validate: layer ")]
    spec = json.loads((readme_demo.out / "stages" / "spec" / "report-spec.json").read_text())["details"]["spec"]
    assert layers == [f"validate: layer {i} of {spec['num_layers']}" for i in range(1, spec["num_layers"] + 1)]
    # the summary table's lines are as long as they need to be: nothing cut with an ellipsis
    assert "…" not in readme_demo.stdout and max(map(len, readme_demo.stdout.splitlines())) > 80


def test_a_skipped_stage_says_so_on_its_line(tmp_path):
    skipped = ("generate", "conform", "compile", "validate", "package")
    args = [a for stage in skipped for a in ("--skip", stage)]
    result = integrate("run", "--demo", *args, "-o", tmp_path / "out", env={"OMP_NUM_THREADS": "1"})
    assert result.code == 0, result.err
    said = [line.split(" ", 2)[2] for line in result.err.splitlines()]
    for stage in skipped:
        assert f"{stage}: not run: skipped on request (--skip {stage})" in said, said


def _steps(said: list[str], start: int) -> int:
    """How many step lines follow a stage's start line."""
    stage = said[start].split(":")[0]
    n = 0
    while said[start + 1 + n].startswith(f"{stage}: ") and not re.match(
        rf"{stage}: (pass|fail|not run|partial)", said[start + 1 + n]
    ):
        n += 1
    return n
