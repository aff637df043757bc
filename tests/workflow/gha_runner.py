"""Run a GitHub Actions workflow here, job by job, the way a runner would, to find what only running it finds.

Each job gets an empty workspace and a clean environment (the variables a runner sets; no test-venv `integrate`
on PATH). `run:` steps run with `bash -e` and the GITHUB_ENV / GITHUB_OUTPUT / GITHUB_PATH / GITHUB_STEP_SUMMARY
files; expressions in `env:`, `with:`, `if:` and `environment:` are evaluated (gha_expressions.py); jobs run in file
order once their `needs` are met, with GitHub's default and `!cancelled()` conditions. Actions are emulated in
gha_actions.py: checkout clones the origin repository at the event's commit, setup-python gives a fresh venv,
artifacts are folders (upload and download with GitHub's rules), Pages keeps the deployed folder, and the PyPI
upload is a dry run of PyPI's checks.

What differs from a hosted runner, on purpose: there is no network. pip resolves against the test environment
only (PIP_NO_INDEX; each job's venv sees the test venv's packages through a .pth file, not its dayone) and builds
without isolation; the GitHub API is the local fake (GITHUB_API_URL); the HF Hub is a prepared offline cache;
compiled kernels come from the test session's kernel cache (as from a restored cache).
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from gha_expressions import Evaluator

SUCCESS, FAILURE, SKIPPED = "success", "failure", "skipped"


@dataclass
class Event:
    """What triggered the run: workflow_dispatch on a branch (inputs) or a push of a tag (vars)."""

    name: str  # "workflow_dispatch" | "push"
    ref: str  # "refs/heads/main" | "refs/tags/v0.1.0"
    inputs: dict = field(default_factory=dict)


@dataclass
class Step:
    name: str
    result: str
    log: str = ""


@dataclass
class Job:
    name: str
    result: str
    steps: list[Step] = field(default_factory=list)
    summary: str = ""
    workspace: Path | None = None
    environment: str | None = None

    def log(self) -> str:
        return "\n".join(f"--- {s.name}: {s.result}\n{s.log[-4000:]}" for s in self.steps)


@dataclass
class Runner:
    """Shared state of one workflow run."""

    root: Path  # scratch for this run: jobs/, artifacts/
    origin: Path  # the repository the run is for (a git repo, with the event's ref)
    repository: str  # owner/name
    event: Event
    vars: dict = field(default_factory=dict)
    secrets: dict = field(default_factory=dict)  # repository secrets
    environment_secrets: dict = field(default_factory=dict)  # environment name -> {secret: value}
    env: dict = field(default_factory=dict)  # extra runner variables (GITHUB_API_URL, HF_HOME, ...)
    before_step: dict = field(default_factory=dict)  # (job, step name) -> callable(workspace): harness-only setup
    artifacts: Path = field(init=False)
    pages: Path | None = None  # the deployed site
    pypi: list[str] = field(default_factory=list)  # files the PyPI dry run accepted
    annotations: list[str] = field(default_factory=list)  # ::warning / ::error lines and action warnings

    def __post_init__(self) -> None:
        self.artifacts = self.root / "artifacts"
        self.artifacts.mkdir(parents=True, exist_ok=True)

    @property
    def sha(self) -> str:
        return _git(self.origin, "rev-parse", self.event.ref)

    def run(self, workflow: Path) -> dict[str, Job]:
        doc = yaml.safe_load(workflow.read_text())
        triggers = doc.get(True, doc.get("on"))  # YAML 1.1 reads the key `on` as True
        assert self.event.name in triggers, f"{workflow.name} is not triggered by {self.event.name}"
        jobs: dict[str, Job] = {}
        pending = dict(doc["jobs"])
        while pending:
            ready = [n for n, j in pending.items() if all(d in jobs for d in _needs(j))]
            assert ready, f"jobs with unmet needs: {sorted(pending)}"
            name = ready[0]
            jobs[name] = self._job(name, pending.pop(name), doc.get("env") or {}, jobs)
        return jobs

    # -- a job ---------------------------------------------------------------------------------------------------
    def _job(self, name: str, spec: dict, workflow_env: dict, done: dict[str, Job]) -> Job:
        needs = {n: {"result": done[n].result, "outputs": {}} for n in _needs(spec)}
        status = {
            "success": lambda: all(n["result"] == SUCCESS for n in needs.values()),
            "failure": lambda: any(n["result"] == FAILURE for n in needs.values()),
            "cancelled": lambda: False,
            "always": lambda: True,
        }
        base = Evaluator(self._contexts(needs=needs, env={}), status)
        if not base.condition(spec.get("if")):
            return Job(name, SKIPPED)
        environment = spec.get("environment")
        env_name = environment.get("name") if isinstance(environment, dict) else environment
        secrets = {**self.secrets, **self.environment_secrets.get(env_name, {})}
        folder = self.root / "jobs" / name
        workspace = folder / "workspace"
        workspace.mkdir(parents=True)
        job = Job(name, SUCCESS, workspace=workspace, environment=env_name)
        files = {k: folder / k.lower() for k in ("GITHUB_ENV", "GITHUB_PATH", "GITHUB_STEP_SUMMARY")}
        for f in files.values():
            f.touch()
        state = JobState(self, job, folder, workspace, files, secrets, needs)
        job_env = {}
        for key, value in {**workflow_env, **(spec.get("env") or {})}.items():
            job_env[key] = state.evaluator().substitute(str(value))
        state.env.update(job_env)
        for i, step in enumerate(spec.get("steps", [])):
            label = step.get("name") or step.get("uses") or step.get("run", "").splitlines()[0]
            if not state.evaluator().condition(step.get("if")):
                job.steps.append(Step(label, SKIPPED))
                continue
            hook = self.before_step.get((name, label))
            if hook:
                hook(workspace)
            ok, log = state.step(step, i)
            job.steps.append(Step(label, SUCCESS if ok else FAILURE, log))
            if not ok and not step.get("continue-on-error"):
                job.result = FAILURE
        if isinstance(environment, dict) and "url" in environment:
            state.evaluator().substitute(str(environment["url"]))  # must evaluate (it may name a step's output)
        job.summary = files["GITHUB_STEP_SUMMARY"].read_text()
        return job

    def _contexts(self, needs: dict, env: dict, steps: dict | None = None, secrets: dict | None = None) -> dict:
        ref = self.event.ref
        github = {
            "event_name": self.event.name,
            "ref": ref,
            "ref_name": ref.rpartition("/")[2],
            "ref_type": "tag" if ref.startswith("refs/tags/") else "branch",
            "repository": self.repository,
            "sha": self.sha,
            "token": self.secrets.get("GITHUB_TOKEN", ""),
            "workspace": "",
        }
        inputs = dict(self.event.inputs) if self.event.name == "workflow_dispatch" else {}
        return {
            "github": github,
            "inputs": inputs,
            "vars": dict(self.vars),
            "secrets": dict(secrets or {}),
            "env": dict(env),
            "needs": needs,
            "steps": steps or {},
            "runner": {"os": "Linux", "temp": str(self.root / "tmp")},
        }


class JobState:
    """One job's environment, files and step outputs while it runs."""

    def __init__(self, runner: Runner, job: Job, folder: Path, workspace: Path, files: dict, secrets: dict, needs):
        self.runner, self.job, self.folder, self.workspace = runner, job, folder, workspace
        self.files, self.secrets, self.needs = files, secrets, needs
        self.steps: dict[str, dict] = {}
        self.path: list[str] = []
        self.env: dict[str, str] = {}

    def evaluator(self) -> Evaluator:
        failed = lambda: self.job.result == FAILURE
        status = {
            "success": lambda: not failed(),
            "failure": failed,
            "cancelled": lambda: False,
            "always": lambda: True,
        }
        contexts = self.runner._contexts(self.needs, self.env, self.steps, self.secrets)
        contexts["github"]["workspace"] = str(self.workspace)
        return Evaluator(contexts, status)

    def base_env(self) -> dict[str, str]:
        """A runner's environment: no test venv on PATH, no pip configuration from this machine, no network."""
        test_bin = str(Path(sys.prefix) / "bin")
        system_path = [p for p in os.environ.get("PATH", "/usr/bin:/bin").split(":") if p and p != test_bin]
        ref = self.runner.event.ref
        env = {
            "HOME": str(self.folder / "home"),
            "LANG": "C.UTF-8",
            "PATH": ":".join([*reversed(self.path), *system_path]),
            "TMPDIR": str(self.folder / "tmp"),
            "CI": "true",
            "GITHUB_ACTIONS": "true",
            "GITHUB_WORKSPACE": str(self.workspace),
            "GITHUB_REPOSITORY": self.runner.repository,
            "GITHUB_EVENT_NAME": self.runner.event.name,
            "GITHUB_REF": ref,
            "GITHUB_REF_NAME": ref.rpartition("/")[2],
            "GITHUB_REF_TYPE": "tag" if ref.startswith("refs/tags/") else "branch",
            "GITHUB_SHA": self.runner.sha,
            "GITHUB_JOB": self.job.name,
            "RUNNER_TEMP": str(self.folder / "tmp"),
            "PIP_CONFIG_FILE": os.devnull,
            "PIP_NO_INDEX": "1",
            "PIP_NO_BUILD_ISOLATION": "0",  # pip's inverted spelling: 0 turns isolation off
            "PIP_DISABLE_PIP_VERSION_CHECK": "1",
            **self.runner.env,
        }
        (self.folder / "home").mkdir(exist_ok=True)
        (self.folder / "tmp").mkdir(exist_ok=True)
        for key in ("GITHUB_ENV", "GITHUB_PATH", "GITHUB_STEP_SUMMARY"):
            env[key] = str(self.files[key])
        return env

    def step(self, step: dict, index: int) -> tuple[bool, str]:
        evaluator = self.evaluator()
        step_env = {k: evaluator.substitute(str(v)) for k, v in (step.get("env") or {}).items()}
        if "uses" in step:
            from gha_actions import run_action

            inputs = {k: evaluator.substitute(str(v)) for k, v in (step.get("with") or {}).items()}
            ok, log, outputs = run_action(self, step["uses"], inputs)
        else:
            ok, log, outputs = self._run_script(evaluator.substitute(step["run"]), step_env, step, index)
        if "id" in step:
            self.steps[step["id"]] = {"outputs": outputs, "outcome": SUCCESS if ok else FAILURE}
        return ok, log

    def _run_script(self, script: str, step_env: dict, step: dict, index: int) -> tuple[bool, str, dict]:
        output = self.folder / f"output-{index}"
        output.write_text("")
        script_file = self.folder / f"step-{index}.sh"
        script_file.write_text(script)
        env = {**self.base_env(), **self.env, **step_env, "GITHUB_OUTPUT": str(output)}
        cwd = self.workspace / step.get("working-directory", ".")
        before_env = self.files["GITHUB_ENV"].read_text()
        before_path = self.files["GITHUB_PATH"].read_text()
        proc = subprocess.run(["bash", "-e", str(script_file)], cwd=cwd, env=env, capture_output=True, text=True,
                              timeout=1800, check=False)  # fmt: skip
        log = proc.stdout + proc.stderr
        self.runner.annotations += [line for line in log.splitlines() if line.startswith(("::error", "::warning"))]
        self.env.update(parse_env_file(self.files["GITHUB_ENV"].read_text()[len(before_env) :]))
        self.path += [p for p in self.files["GITHUB_PATH"].read_text()[len(before_path) :].splitlines() if p]
        return proc.returncode == 0, log, parse_env_file(output.read_text())

    def add_path(self, folder: Path) -> None:
        self.path.append(str(folder))


def parse_env_file(text: str) -> dict[str, str]:
    """GITHUB_ENV / GITHUB_OUTPUT lines: NAME=value, or NAME<<DELIMITER ... DELIMITER for multi-line values."""
    out, lines, i = {}, text.splitlines(), 0
    while i < len(lines):
        line = lines[i]
        if "<<" in line and ("=" not in line or line.index("<<") < line.index("=")):
            name, delimiter = line.split("<<", 1)
            end = lines.index(delimiter, i + 1)
            out[name] = "\n".join(lines[i + 1 : end])
            i = end + 1
            continue
        if "=" in line:
            name, value = line.split("=", 1)
            out[name] = value
        elif line.strip():
            raise ValueError(f"GITHUB_ENV/GITHUB_OUTPUT line without '=': {line!r}")
        i += 1
    return out


def _needs(job: dict) -> list[str]:
    needs = job.get("needs") or []
    return [needs] if isinstance(needs, str) else list(needs)


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()
