"""The GPU check (benchmarks/gpu_check.sh) kept working without a GPU: the wheel folder is prepared for real, then the
whole script runs in its dry-run mode (CPU, Triton interpreter, tiny shapes), installing from those wheels.

What the dry run cannot show is said in docs/gpu.md: compiled kernels, real timings, autotune winners.
"""

import importlib.util
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CARRY_LIMIT_MIB = 64  # what one device call may carry
GOALS = {  # the acceptance figures, each with its goal
    "kda prefill: fla chunk_kda time / ours": 1.0,
    "kda decode: fraction of HBM bandwidth": 0.7,
    "mla decode: fraction of HBM bandwidth": 0.7,
}


@pytest.fixture(scope="module")
def wheels(tmp_path_factory):
    folder = tmp_path_factory.mktemp("gpu") / "wheels"
    env = {**os.environ, "PYTHON": sys.executable}
    run = subprocess.run(["bash", "benchmarks/gpu_wheels.sh", str(folder)], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=600, check=False)  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    return folder


@pytest.fixture(scope="module")
def dry_run(wheels, tmp_path_factory):
    out = tmp_path_factory.mktemp("gpu") / "out"
    env = {k: v for k, v in os.environ.items() if k not in ("TRITON_INTERPRET", "PYTHONPATH", "DAYONE_TEST_DEVICE")}
    env["PYTHON"] = sys.executable
    run = subprocess.run(
        ["bash", "benchmarks/gpu_check.sh", str(out), "--wheels", str(wheels), "--dry-run"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    return run, out


def test_wheel_folder_holds_what_the_gpu_machine_lacks_and_fits_a_device_call(wheels):
    names = sorted(p.name for p in wheels.iterdir())
    size_mib = sum(p.stat().st_size for p in wheels.iterdir()) / 2**20
    assert size_mib < CARRY_LIMIT_MIB, f"{size_mib:.1f} MiB of wheels"
    for wanted in ("dayone-", "fla_core-0.6.0-", "einops-", "pydantic-", "annotated_types-", "typing_inspection-"):
        assert any(n.startswith(wanted) for n in names), f"no {wanted}* wheel in {names}"
    for python in ("cp311", "cp312"):  # this machine's CPython and the GPU image's
        assert any(n.startswith("pydantic_core-") and f"-{python}-" in n for n in names), names
    assert not any(n.startswith(("torch-", "triton-")) for n in names), "torch and triton are the machine's own"
    with zipfile.ZipFile(next(wheels.glob("dayone-*.whl"))) as wheel:
        files = set(wheel.namelist())
    # what the check runs from the wheel: kernels, the specs it synthesises and validates
    assert {"dayone/kernels/kda/chunk.py", "dayone/spec/models/kimi-k3.yaml"} <= files


def test_dry_run_passes_every_step_from_the_installed_wheels(dry_run):
    run, out = dry_run
    assert run.returncode == 0, f"{run.stdout[-3000:]}\n{run.stderr[-3000:]}"
    report = json.loads((out / "gpu_check.json").read_text())
    assert report["dry_run"] is True and report["verdict"] == "pass"
    steps = report["steps"]
    assert set(steps) == {"kernel_tests", "validate", "kernels_bench", "autotune"}
    assert all(step["status"] == "pass" for step in steps.values()), {n: s["status"] for n, s in steps.items()}
    # dayone and fla came from the temporary site the wheels were installed into, not from this checkout or venv
    env = report["environment"]
    assert "dayone-site." in env["dayone_from"] and "dayone-site." in env["fla_from"], env
    assert env["wheels_built_from"] and not env["wheels_built_from"].startswith("unknown"), env  # the commit

    tests = steps["kernel_tests"]["detail"]
    assert tests["tests"] > 0 and tests["failures"] == tests["errors"] == 0
    assert steps["validate"]["detail"]["kimi-linear-48b-a3b"]["status"] == "pass"
    bench = steps["kernels_bench"]["detail"]
    assert bench["dry_run"] is True and bench["checks"] and all(c["passed"] for c in bench["checks"])
    figures = {f["name"]: f for f in bench["figures"]}
    for name, goal in GOALS.items():
        assert figures[name]["goal"] == goal and figures[name]["value"] > 0
    mxfp4 = [f for f in bench["figures"] if f["name"].startswith("mxfp4") and f["goal"] is not None]
    assert len(mxfp4) == 2 and all(f["goal"] == 2.0 for f in mxfp4)
    assert {f["name"] for f in report["goals"]} == set(GOALS) | {f["name"] for f in mxfp4}

    summary = (out / "gpu_check.md").read_text()
    assert "dry run" in summary and "| kda decode: fraction of HBM bandwidth |" in summary and ">= 0.7" in summary
    log = (out / "gpu_check.log").read_text()
    assert "===== kernel_tests" in log and "===== autotune" in log


def load_gpu_check():
    spec = importlib.util.spec_from_file_location("gpu_check", ROOT / "benchmarks" / "gpu_check.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["gpu_check"] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_any_failed_or_crashed_step_fails_the_check(tmp_path, monkeypatch):
    gpu_check = load_gpu_check()
    outcomes = {"kernel_tests": "pass", "validate": "fail", "kernels_bench": "pass", "autotune": "error"}
    for name, status in outcomes.items():
        monkeypatch.setattr(gpu_check.Check, name, lambda self, name=name, status=status: gpu_check.Step(name, status))
    report = gpu_check.Check(tmp_path, dry_run=True, budget_s=60).run_all()
    assert report["verdict"] == "fail" and sorted(report["failed_steps"]) == ["autotune", "validate"]


def test_junit_summary_names_the_failing_tests(tmp_path):
    xml = tmp_path / "t.xml"
    xml.write_text(
        '<testsuites><testsuite tests="3" failures="1" errors="0" skipped="0">'
        '<testcase classname="tests.kernels.test_kda" name="test_a[cuda-triton]">'
        '<failure message="AssertionError: o: FAIL [fp32_kernel] max_abs=1e-2&#10;more">trace</failure></testcase>'
        '<testcase classname="tests.kernels.test_kda" name="test_b[cuda-torch]"/>'
        "</testsuite></testsuites>"
    )
    summary = load_gpu_check().junit_summary(xml)
    assert summary["tests"] == 3 and summary["failures"] == 1
    assert summary["failing"] == [
        {"test": "tests.kernels.test_kda::test_a[cuda-triton]", "message": "AssertionError: o: FAIL [fp32_kernel] "
         "max_abs=1e-2"}
    ]  # fmt: skip
