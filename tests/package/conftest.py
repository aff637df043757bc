"""One set of kimi-k3 adapters (all targets, no --check), two stage reports beside them, and one package build,
shared by the module's tests (packaging four adapters takes ~15 s on two cores)."""

from __future__ import annotations

import json

import pytest
from cli_runner import integrate

REVISION = "0123456789abcdef0123456789abcdef01234567"


def validate_report() -> dict:
    return {
        "stage": "validate", "spec": "kimi-k3", "target": "reference", "arch": None, "status": "fail",
        "created": "2026-05-01T12:00:00Z",
        "details": {"candidate": "fast", "reference": "naive", "checkpoint": "out/k3-tiny",
                    "first_failure": {"layer": 7, "capture": "mlp_out", "metric": "rel_rms",
                                      "values": {"rel_rms": 0.25}, "tolerance": "bf16_activation"}},
    }  # fmt: skip


def resources() -> dict:
    """`integrate compile`'s resources.json shape (read by dayone.reports.files as compile reports)."""
    row = {"kernel": "kda_chunk_fwd", "config": "BT=64,num_warps=4", "arch": "sm_90", "registers": 128,
           "shared_bytes": 98304, "spill_bytes": 0}  # fmt: skip
    return {"stage": "compile", "spec": "kimi-k3", "archs": ["sm_90"], "ok": True, "kernels": [row], "seconds": 1.0}


@pytest.fixture(scope="session")
def outdir(tmp_path_factory):
    out = tmp_path_factory.mktemp("stages") / "out"
    result = integrate("generate", "kimi-k3", "-o", out)
    assert result.code == 0, result.err
    (out / "validate.json").write_text(json.dumps(validate_report(), indent=2))
    (out / "compile").mkdir()
    (out / "compile" / "resources.json").write_text(json.dumps(resources(), indent=2))
    (out / "notes.json").write_text('{"not": "a report"}')  # other JSON is left alone
    return out


@pytest.fixture(scope="session")
def packaged(outdir, tmp_path_factory):
    """(dist folder, --json document, --report path)."""
    root = tmp_path_factory.mktemp("package")
    dist, report = root / "dist", root / "package-report.json"
    result = integrate("package", outdir, "-o", dist, "--revision", REVISION, "--json", "--report", report)
    assert result.code == 0, result.err
    return dist, json.loads(result.out), report
