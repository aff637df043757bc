"""Run `integrate` the way a user does, in a subprocess, and check the bad-input contract."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass


@dataclass
class Result:
    code: int
    out: str
    err: str


def integrate(*args: str, env: dict | None = None, cwd=None, timeout: float = 600) -> Result:
    full_env = {**os.environ, **(env or {})}
    full_env.pop("TRITON_INTERPRET", None)
    proc = subprocess.run(
        [sys.executable, "-P", "-m", "dayone", *map(str, args)],
        check=False,
        capture_output=True,
        text=True,
        env=full_env,
        cwd=cwd,
        timeout=timeout,
    )
    return Result(proc.returncode, proc.stdout, proc.stderr)


# Progress off a terminal: one timestamped line per step (dayone.present.progress_line), written before an error is met.
PROGRESS = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ ")


def assert_bad_input(result: Result, *fragments: str) -> str:
    """Exit code 2, exactly one line on stderr naming what is wrong (after any progress lines), and no traceback."""
    assert result.code == 2, f"exit {result.code}, stderr: {result.err!r}"
    lines = [line for line in result.err.splitlines() if line.strip() and not PROGRESS.match(line)]
    assert len(lines) == 1, f"expected one line, got: {result.err!r}"
    assert "Traceback" not in result.err
    for fragment in fragments:
        assert fragment in lines[0], f"{fragment!r} not in {lines[0]!r}"
    return lines[0]
