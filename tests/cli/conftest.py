"""Kernels compiled once per session for the full K3 (both archs): the compile tests read them, and the lazy-import
test reruns the same compile, fully cached."""

import json
from dataclasses import dataclass
from pathlib import Path

import pytest
from cli_runner import integrate

SPEC_FILE = Path(__file__).resolve().parents[2] / "spec" / "models" / "kimi-k3.yaml"


@dataclass
class K3Build:
    out: Path
    report: dict  # the --json document
    err: str  # what it printed on stderr (off a terminal: a timestamped line per kernel)
    args: tuple  # `integrate` arguments that built it, -o OUT included: run again, everything is cached


@pytest.fixture(scope="session")
def k3_build(tmp_path_factory) -> K3Build:
    out = tmp_path_factory.mktemp("k3-kernels")
    args = ("compile", SPEC_FILE, "--arch", "sm_90", "--arch", "sm_100", "-o", out)
    result = integrate(*args, "--json")
    assert result.code == 0, result.err
    return K3Build(out, json.loads(result.out), result.err, args)
