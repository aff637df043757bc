"""The GPU check in one call: correctness verdicts and speed figures of every dayone kernel on one H100/H200.

    bash benchmarks/gpu_check.sh OUT [--dry-run]     (installs the wheels, then runs this; docs/gpu.md)
    python benchmarks/gpu_check.py OUT [--dry-run] [--budget-s 480]

Steps, each a subprocess with its own time limit, its output appended to OUT/gpu_check.log:
  1. kernel tests    tests/kernels with DAYONE_TEST_DEVICE=cuda: every kernel compiled for this GPU against its fp32
                     reference, and KDA against fla's chunk_kda and fused_recurrent_kda.
  2. validate        tiny K3 and tiny Kimi Linear (integrate synth --scale tiny): the fast tier with the Triton kernels
                     against the fp32 reference tier (integrate validate --reference naive --kernels triton).
  3. kernels bench   benchmarks/kernels.py at the issues' workloads: ratios against fla and the HBM limit.
  4. autotune        integrate compile kimi-k3 --arch sm_90 --autotune: the winners on this GPU.
Steps 1 and 2 only judge correctness and run side by side; 3 and 4 time kernels and run alone on the GPU.
Writes OUT/gpu_check.json (everything, each figure beside its goal) and OUT/gpu_check.md (the same for a person).
Exit code 1 on any correctness failure (a failed test, a validate verdict other than pass, a kernel that disagrees
with its peer, a step that crashed or ran out of time); missed speed goals are reported, not failed.

--dry-run: the same steps on the CPU so that CI keeps the script working: Triton in the interpreter, tiny shapes
(kernels.py --dry-run), two kernel test files (CI runs them all anyway), one model validated with the torch kernels,
and autotune expected to refuse (it needs a GPU). Its figures mean nothing.
"""

from __future__ import annotations

import os
import sys

# This script's folder holds scripts named like modules (inspect.py, kernels.py): keep it off the import path.
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != os.path.dirname(os.path.abspath(__file__))]

import argparse
import json
import platform
import shutil
import subprocess
import tempfile
import time
import xml.etree.ElementTree as ET
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
KERNEL_TESTS = [
    "test_kda.py", "test_kda_fla.py", "test_spec_decode.py", "test_short_conv.py", "test_gated_rmsnorm.py",
    "test_mla_decode.py", "test_attn_residual.py", "test_situ.py", "test_mxfp4.py", "test_moe_combine.py",
    "test_dot_precision.py", "test_kda_triton_backward.py",
]  # fmt: skip
DRY_KERNEL_TESTS = ["test_situ.py", "test_gated_rmsnorm.py"]
MODELS = ("kimi-k3", "kimi-linear-48b-a3b")
DRY_MODELS = ("kimi-linear-48b-a3b",)
AUTOTUNE_SPEC = "kimi-k3"
# Seconds per step on the GPU: the four fit the 8 minutes together (1 and 2 run side by side).
LIMITS = {"kernel_tests": 240, "validate": 240, "kernels_bench": 150, "autotune": 200}


@dataclass
class Step:
    name: str
    status: str = "not run"  # pass | fail | error | not run
    seconds: float = 0.0
    returncode: int | None = None
    detail: dict = field(default_factory=dict)
    note: str = ""


class Check:
    """Runs the steps, keeps their results and the log, writes the report."""

    def __init__(self, out: Path, dry_run: bool, budget_s: float):
        self.out, self.dry_run = out, dry_run
        self.deadline = time.monotonic() + budget_s
        self.work = Path(tempfile.mkdtemp(prefix="gpu-check-"))
        self.log = out / "gpu_check.log"
        self.log.write_text("")
        self.steps: dict[str, Step] = {}

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
        if self.dry_run:
            env["TRITON_INTERPRET"] = "1"
        env["PYTHONUNBUFFERED"] = "1"
        return env

    def run(self, step: Step, argv: list[str], limit: float, env: dict | None = None) -> subprocess.CompletedProcess:
        """One subprocess under min(limit, the budget left); its output goes to the log under the step's name."""
        limit = max(1.0, min(limit, self.deadline - time.monotonic()))
        start = time.monotonic()
        try:
            done = subprocess.run(
                argv, cwd=ROOT, env=env or self.env(), capture_output=True, text=True, timeout=limit, check=False
            )
            output = done.stdout + done.stderr
        except subprocess.TimeoutExpired as err:
            output = (err.stdout or b"").decode(errors="replace") + (err.stderr or b"").decode(errors="replace")
            done = subprocess.CompletedProcess(argv, 124, output, "")
            step.note = f"stopped after its {limit:.0f} s limit"
        step.seconds += time.monotonic() - start
        step.returncode = done.returncode
        with self.log.open("a") as log:
            log.write(f"\n===== {step.name}: {' '.join(argv)}  (exit {done.returncode})\n{output}")
        return done

    # --- the steps ---------------------------------------------------------------------------------------------
    def kernel_tests(self) -> Step:
        step = Step("kernel_tests")
        files = DRY_KERNEL_TESTS if self.dry_run else KERNEL_TESTS
        xml = self.work / "kernel-tests.xml"
        argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={xml}"]
        if not self.dry_run and _importable("xdist"):
            argv += ["-n", "8"]  # compiling the kernels is most of the time: spread it over the CPU cores
        env = self.env()
        env["DAYONE_TEST_DEVICE"] = "cpu" if self.dry_run else "cuda"
        done = self.run(step, argv + [f"tests/kernels/{f}" for f in files], LIMITS["kernel_tests"], env)
        step.detail = junit_summary(xml) if xml.exists() else {}
        ran = step.detail.get("tests", 0) > 0
        step.status = "pass" if done.returncode == 0 and ran else ("fail" if ran and done.returncode == 1 else "error")
        return step

    def validate(self) -> Step:
        step = Step("validate")
        ends = time.monotonic() + LIMITS["validate"]  # one limit for the step's four commands
        for model in DRY_MODELS if self.dry_run else MODELS:
            checkpoint, report = self.work / f"{model}-tiny", self.work / f"validate-{model}.json"
            done = self.run(step, [sys.executable, "-m", "dayone", "synth", model, "--scale", "tiny", "-o",
                                   str(checkpoint)], ends - time.monotonic())  # fmt: skip
            if done.returncode != 0:
                step.detail[model] = {"status": "error", "why": "integrate synth failed"}
                continue
            argv = [sys.executable, "-m", "dayone", "validate", str(checkpoint), "--reference", "naive", "--report",
                    str(report)]  # fmt: skip
            if self.dry_run:  # the interpreter would take a quarter of an hour over a whole model
                argv += ["--device", "cpu", "--kernels", "torch", "--no-reload-check"]
            else:
                argv += ["--device", "cuda", "--kernels", "triton"]
            self.run(step, argv, ends - time.monotonic())
            summary = validate_summary(report) if report.exists() else {"status": "error"}
            if not self.dry_run and set(summary.get("kernels", {}).values()) - {"triton"}:
                # A fast tier that fell back to a torch counterpart would not have checked that kernel.
                summary.update(status="fail", why="not every op of the fast tier ran its Triton kernel")
            step.detail[model] = summary
        verdicts = [d["status"] for d in step.detail.values()]
        step.status = "pass" if verdicts and all(v == "pass" for v in verdicts) else (
            "error" if "error" in verdicts or not verdicts else "fail")  # fmt: skip
        return step

    def kernels_bench(self) -> Step:
        step = Step("kernels_bench")
        report = self.work / "kernels.json"
        argv = [sys.executable, "benchmarks/kernels.py", "--skip-compile", "--json", str(report)]
        done = self.run(step, argv + (["--dry-run"] if self.dry_run else []), LIMITS["kernels_bench"])
        if report.exists():
            step.detail = json.loads(report.read_text())
        checks = step.detail.get("checks", [])
        if done.returncode == 0 and checks:
            step.status = "pass"
        else:
            step.status = "fail" if checks and done.returncode == 1 else "error"
        return step

    def autotune(self) -> Step:
        step = Step("autotune")
        folder = self.work / f"compile-{AUTOTUNE_SPEC}"
        argv = [sys.executable, "-m", "dayone", "compile", AUTOTUNE_SPEC, "--arch", "sm_90", "--autotune", "--json",
                "-o", str(folder)]  # fmt: skip
        done = self.run(step, argv, LIMITS["autotune"])
        resources = folder / "resources.json"
        if self.dry_run:
            # No GPU here: the command must refuse with its one line and exit code 2, and write nothing.
            refused = done.returncode == 2 and "--autotune needs a CUDA GPU" in done.stdout + done.stderr
            step.status = "pass" if refused and not resources.exists() else "error"
            step.note = "not run: needs a GPU (the dry run checks that the command refuses cleanly)"
            return step
        if done.returncode == 0 and resources.exists():
            report = json.loads(resources.read_text())
            step.detail = {"arch": report["autotune"]["arch"], "device": report["autotune"]["device"],
                           "kernels": report["autotune"]["kernels"], "builds": len(report["kernels"])}  # fmt: skip
            step.status = "pass"
        else:
            step.status = "error"
        return step

    # --- the whole run -----------------------------------------------------------------------------------------
    def run_all(self) -> dict:
        try:
            return self._run_all()
        finally:
            shutil.rmtree(self.work, ignore_errors=True)

    def _run_all(self) -> dict:
        started = time.monotonic()
        with ThreadPoolExecutor(2) as pool:  # correctness only: side by side
            tests, validate = pool.submit(self.kernel_tests), pool.submit(self.validate)
            for step in (tests.result(), validate.result()):
                self.steps[step.name] = step
        for make in (self.kernels_bench, self.autotune):  # timings: alone on the GPU
            if time.monotonic() >= self.deadline:
                name = make.__name__
                self.steps[name] = Step(name, note="not run: the time budget was spent")
                continue
            step = make()
            self.steps[step.name] = step
        failed = [s.name for s in self.steps.values() if s.status != "pass"]
        return {
            "dry_run": self.dry_run,
            "verdict": "fail" if failed else "pass",
            "failed_steps": failed,
            "seconds": round(time.monotonic() - started, 1),
            "environment": environment(),
            "goals": goals(self.steps.get("kernels_bench")),
            "steps": {name: asdict(step) for name, step in self.steps.items()},
        }


# --- reading the steps' outputs ------------------------------------------------------------------------------------
def junit_summary(xml: Path) -> dict:
    """Counts and the failing tests (id and first line of the message) from pytest's JUnit XML."""
    root = ET.parse(xml).getroot()
    suites = [root] if root.tag == "testsuite" else list(root)
    counts = {key: sum(int(s.get(key, 0)) for s in suites) for key in ("tests", "failures", "errors", "skipped")}
    failing = []
    for case in root.iter("testcase"):
        for bad in list(case.findall("failure")) + list(case.findall("error")):
            message = (bad.get("message") or "").strip().splitlines()
            failing.append({"test": f"{case.get('classname')}::{case.get('name')}", "message": message[0][:300]
                            if message else ""})  # fmt: skip
    return {**counts, "failing": failing}


def validate_summary(report_file: Path) -> dict:
    """The verdict of one `integrate validate --report` file and the figures a person reads first."""
    report = json.loads(report_file.read_text())
    details = report.get("details", {})
    logprobs = details.get("logprobs", {})
    worst = max(details.get("numerics", []), key=lambda c: c.get("rel_rms") or 0.0, default={})
    return {
        "status": report.get("status"),
        "kernels": details.get("backend", {}).get("kernels", {}),
        "device": details.get("backend", {}).get("device"),
        "first_failure": details.get("first_failure"),
        "worst_capture": {k: worst.get(k) for k in ("capture", "layer", "rel_rms", "cosine", "tolerance")},
        "logprobs": {k: logprobs.get(k) for k in ("mean_abs", "p95_abs", "max_abs", "kl_mean", "top1_agreement")},
        "logprob_verdicts": logprobs.get("verdicts", {}),
    }


def goals(bench: Step | None) -> list[dict]:
    """Every figure that has a goal, with whether it was met (the issue's acceptance list)."""
    if bench is None:
        return []
    return [f for f in bench.detail.get("figures", []) if f.get("goal") is not None]


def environment() -> dict:
    import torch
    import triton

    info = {"python": platform.python_version(), "torch": torch.__version__, "triton": triton.__version__}
    info["wheels_built_from"] = os.environ.get("DAYONE_WHEELS_BUILT_FROM")  # commit and time (gpu_wheels.sh)
    if torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name()
        major, minor = torch.cuda.get_device_capability()
        info["capability"] = f"sm_{major}{minor}"
    for name in ("dayone", "fla"):
        try:
            info[f"{name}_from"] = str(Path(__import__(name).__file__).parent)
        except ImportError:
            info[f"{name}_from"] = None
    return info


def _importable(module: str) -> bool:
    from importlib.util import find_spec

    return find_spec(module) is not None


# --- the human summary ---------------------------------------------------------------------------------------------
def summary_markdown(report: dict) -> str:
    env = report["environment"]
    dry = " (dry run on the CPU: figures mean nothing)" if report["dry_run"] else ""
    where = f"{env.get('gpu', 'no GPU')} {env.get('capability', '')}".strip()
    versions = f"torch {env['torch']}, triton {env['triton']}, python {env['python']}"
    lines = [
        f"# dayone GPU check: {report['verdict'].upper()}{dry}",
        "",
        f"{where}; {versions}; dayone wheel built from {env.get('wheels_built_from')}; {report['seconds']} s in all.",
        "",
        "| step | verdict | seconds | detail |",
        "|---|---|---|---|",
    ]
    for name, step in report["steps"].items():
        lines.append(f"| {name} | {step['status']} | {step['seconds']:.0f} | {step_detail(name, step)} |")
    lines += ["", "| figure | value | goal | met |", "|---|---|---|---|"]
    bench = report["steps"].get("kernels_bench", {}).get("detail", {})
    for fig in bench.get("figures", []):
        goal = "" if fig["goal"] is None else f">= {fig['goal']:g} {fig['unit']}"
        met = "" if fig["met"] is None else ("yes" if fig["met"] else "NO")
        lines.append(f"| {fig['name']} | {fig['value']:.3g} {fig['unit']} | {goal} | {met} |")
    failing = report["steps"].get("kernel_tests", {}).get("detail", {}).get("failing", [])
    if failing:
        lines += ["", "Failing kernel tests:", ""] + [f"- `{f['test']}`: {f['message']}" for f in failing]
    return "\n".join(lines) + "\n"


def step_detail(name: str, step: dict) -> str:
    detail = step["detail"]
    if name == "kernel_tests" and detail:
        text = f"{detail['tests']} tests, {detail['failures']} failed, {detail['errors']} errors, {detail['skipped']} skipped"
    elif name == "validate":
        text = "; ".join(
            f"{model}: {d['status']}" + (f" (log-prob max {d['logprobs']['max_abs']:.3g})"
                                         if d.get("logprobs", {}).get("max_abs") is not None else "")
            for model, d in detail.items()
        )  # fmt: skip
    elif name == "kernels_bench" and detail:
        bad = [c["what"] for c in detail.get("checks", []) if not c["passed"]]
        text = f"{len(detail.get('checks', []))} peer checks" + (f", failing: {', '.join(bad)}" if bad else ", all ok")
    elif name == "autotune" and detail:
        won = [k for k in detail["kernels"] if k.get("winner") != k.get("default")]
        text = f"{len(detail['kernels'])} kernels tuned on {detail['device']}, {len(won)} with a non-default winner"
    else:
        text = ""
    return "; ".join(t for t in (text, step["note"]) if t)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path, help="folder for gpu_check.json, gpu_check.md and gpu_check.log")
    parser.add_argument("--dry-run", action="store_true", help="on the CPU, interpreter, tiny shapes (CI)")
    parser.add_argument("--budget-s", type=float, default=480.0, help="stop starting steps after this many seconds")
    args = parser.parse_args()
    if not args.dry_run:
        import torch

        if not torch.cuda.is_available():
            print("gpu_check.py: torch sees no CUDA GPU here; use --dry-run on a CPU", file=sys.stderr)
            sys.exit(2)
    args.out.mkdir(parents=True, exist_ok=True)
    check = Check(args.out, args.dry_run, args.budget_s)
    report = check.run_all()
    for name, text in (("gpu_check.json", json.dumps(report, indent=1) + "\n"),
                       ("gpu_check.md", summary_markdown(report))):  # fmt: skip
        tmp = args.out / f".{name}.tmp"
        tmp.write_text(text)
        tmp.replace(args.out / name)
    print(summary_markdown(report))
    sys.exit(0 if report["verdict"] == "pass" else 1)


if __name__ == "__main__":
    main()
