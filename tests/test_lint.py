"""The project's own code is ruff-clean and ruff-formatted (the generated code has its own checks)."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def ruff(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ruff", *args], cwd=ROOT, capture_output=True, text=True, check=False)


def test_ruff_check():
    result = ruff("check", ".")
    assert result.returncode == 0, result.stdout[-3000:]


def test_ruff_format():
    result = ruff("format", "--check", ".")
    assert result.returncode == 0, result.stdout[-3000:]
