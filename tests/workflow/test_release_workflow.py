""".github/workflows/release.yml, executed job by job in a temporary clone (gha_runner.py), in both of its modes:

pre-release  workflow_dispatch with no checkpoint: skeleton inspected, the demo through every stage, the dashboard
             with the spec waiting for its weights, deployed to Pages; its release files are byte for byte those of
             the README's run in another folder (outputs do not depend on where a run happened).
tag          push of v<version> on a commit whose .github/release-checkpoint names a Hub repo (an offline HF cache
             holding a small synthetic K3): the stages, the GitHub release on the local fake GitHub, the PyPI dry
             run, Pages. A tag without a checkpoint fails.

And red for each defect the workflow once had: a relative `-o` that broke packaging, PRE_RELEASE written and never
read, and no step writing the site that is uploaded and deployed. Those runs start from the green run's stage cache
(harness only: a hosted runner starts empty), since stage keys cover the code, a planted code defect still reruns
what it touches.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from urllib.parse import unquote

import pytest
from checkpoints import synthesize
from dayone.checks.releases import cache_dir
from dayone.compile_stage import KERNEL_CACHE_ENV
from gha_runner import FAILURE, SKIPPED, SUCCESS, Event, Runner
from readme_demo import REPO, checkout_tree

sys.path.insert(0, str(Path(__file__).parents[1] / "release"))
from fake_github import FakeGitHub

WORKFLOW = Path(".github/workflows/release.yml")
OWNER, NAME = "acme", "dayone"
TOKEN, HF_TOKEN = "ghs_harness_token_0123456789", "hf_harness_token_0123456789"
HUB_REPO, HUB_COMMIT = "dayone-test/kimi-k3-mini", "0123456789abcdef0123456789abcdef01234567"
DISPATCH = Event("workflow_dispatch", "refs/heads/main", {"spec": "kimi-k3", "checkpoint": "", "revision": "main"})


def _version() -> str:
    return re.search(r'^version = "([^"]+)"', (REPO / "pyproject.toml").read_text(), re.MULTILINE).group(1)


def make_origin(dest: Path, plant=None, source: Path = REPO) -> Path:
    """The repository a run is for: a checkout of `source` (this repository, or the README run's clone, to compare
    with it), committed keeping HEAD's commit time (which the workflow turns into SOURCE_DATE_EPOCH), with a
    v<version> tag; `plant(tree)` changes it first."""
    checkout_tree(dest, source)
    if plant:
        plant(dest)
    date = subprocess.run(["git", "-C", str(dest), "log", "-1", "--format=%cI"], capture_output=True, text=True,
                          check=True).stdout.strip()  # fmt: skip
    env = {"GIT_AUTHOR_NAME": "harness", "GIT_AUTHOR_EMAIL": "harness@example.com", "GIT_COMMITTER_NAME": "harness",
           "GIT_COMMITTER_EMAIL": "harness@example.com", "GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date,
           "PATH": "/usr/bin:/bin"}  # fmt: skip
    for args in (["add", "-A"], ["commit", "-q", "--allow-empty", "-m", "the tree under test"],
                 ["tag", f"v{_version()}"]):  # fmt: skip
        subprocess.run(["git", "-C", str(dest), *args], env=env, check=True, capture_output=True)
    return dest


def run_workflow(root: Path, origin: Path, event: Event, github: FakeGitHub, **extra) -> tuple[Runner, dict]:
    """The framework releases the static checks read come from this machine's dayone cache (filled by the README
    run, with the network a hosted runner has), the GitHub API is the fake. Compiled kernels come from the test
    session's kernel cache (tests/conftest.py), as they would from a runner's restored cache: a cubin is keyed by all
    that decides it, so a cached one is the one the run would build (minutes of ptxas a run). The session's thread
    share (tests/conftest.py) goes along: floats summed by a different number of threads differ in their last bits,
    and the release files are compared byte for byte with the README run's, made with that share."""
    runner = Runner(
        root=root, origin=origin, repository=f"{OWNER}/{NAME}", event=event,
        secrets={"GITHUB_TOKEN": TOKEN}, environment_secrets={"huggingface": {"HF_TOKEN": HF_TOKEN}},
        env={"GITHUB_API_URL": github.url, "DAYONE_CACHE": str(cache_dir().parent),
             KERNEL_CACHE_ENV: os.environ[KERNEL_CACHE_ENV], **threads(), **extra.pop("env", {})}, **extra,
    )  # fmt: skip
    return runner, runner.run(origin / WORKFLOW)


def threads() -> dict[str, str]:
    return {"OMP_NUM_THREADS": os.environ["OMP_NUM_THREADS"]} if "OMP_NUM_THREADS" in os.environ else {}


def results(jobs: dict) -> dict[str, str]:
    return {name: job.result for name, job in jobs.items()}


def logs(jobs: dict) -> str:
    return "\n".join(f"=== {name}: {job.result}\n{job.log()}" for name, job in jobs.items())


def pre_release_problems(runner: Runner, jobs: dict) -> list[str]:
    """What a correct pre-release run shows, as a list of what is wrong (empty: all right)."""
    problems = []
    if results(jobs) != {"stages": SUCCESS, "github-release": SKIPPED, "pypi": SKIPPED, "pages": SUCCESS}:
        problems.append(f"jobs: {results(jobs)}")
    if runner.pages is None or not (runner.pages / "index.html").is_file():
        return [*problems, "no site deployed"]
    index = (runner.pages / "index.html").read_text()
    block = re.search(r'<tbody class="model" data-spec="kimi-k3">(.*?)</tbody>', index, re.DOTALL)
    if not block or "pre-release" not in block.group(1):
        problems.append("the dashboard does not show kimi-k3 as pre-release")
    elif 'data-stage="validate" data-target="sglang" data-state="waiting for weights"' not in block.group(1):
        problems.append("kimi-k3's validate cells do not wait for the weights")
    elif 'data-stage="coverage" data-target="" data-state="pass"' not in block.group(1):
        problems.append("the skeleton's coverage is not on the dashboard")
    if runner.annotations:
        problems.append(f"annotations: {runner.annotations}")
    return problems


@pytest.fixture(scope="module")
def github():
    with FakeGitHub(OWNER, NAME) as server:
        yield server


@pytest.fixture(scope="module")
def pre_release(tmp_path_factory, github, readme_demo):
    root = tmp_path_factory.mktemp("pre-release")
    origin = make_origin(root / "origin", source=readme_demo.clone)  # the same code and commit time as that run
    runner, jobs = run_workflow(root / "run", origin, DISPATCH, github)
    return runner, jobs


def test_pre_release_mode(pre_release):
    runner, jobs = pre_release
    assert pre_release_problems(runner, jobs) == [], logs(jobs)
    assert "Pre-release stages" in jobs["stages"].summary
    # The deployed site also plans the tiny spec the run used (a derived spec, not a shipped one).
    from dayone.dashboard.names import page_name

    tiny = (runner.pages / page_name("model", "kimi-k3-tiny")).read_text()
    assert "No plan" not in tiny


def test_release_files_do_not_depend_on_the_folder_of_the_run(pre_release, readme_demo):
    """The README's run (in its clone, out/demo) and the workflow's (another clone, out/run): same release files."""
    runner, jobs = pre_release
    assert jobs["stages"].result == SUCCESS, logs(jobs)
    stages = json.loads((readme_demo.out / "report.json").read_text())["stages"]
    assert {s["stage"]: s["status"] for s in stages}["package"] == "pass", readme_demo.stdout[-2000:]
    workflow = {p.name: p.read_bytes() for p in (runner.artifacts / "release").iterdir()}
    readme = {p.name: p.read_bytes() for p in (readme_demo.out / "stages" / "package" / "dist").iterdir()}
    # The README's run conforms in the engines and ships that evidence (its reports, the card's conformance table,
    # SHA256SUMS over them); the workflow skips conform. Everything else is the same bytes.
    conform = {n for n in readme if "-report-conform-" in n}
    assert conform and not conform & set(workflow)
    differs = {"kimi-k3-tiny-model-card.md", "SHA256SUMS"}
    assert sorted(workflow) == sorted(set(readme) - conform)
    assert [n for n in workflow if n not in differs and workflow[n] != readme[n]] == []
    assert "## Conformance in the engines" in readme["kimi-k3-tiny-model-card.md"].decode()
    card = workflow["kimi-k3-tiny-model-card.md"].decode()
    assert str(readme_demo.clone) not in card and "/tmp" not in card and "content sha256:" in card


@pytest.fixture(scope="module")
def hub_cache(tmp_path_factory) -> Path:
    """An HF cache holding HUB_REPO at HUB_COMMIT (also its `main`): a 4-layer tiny K3, so the tag run stays short."""
    home = tmp_path_factory.mktemp("hf")
    commit = HUB_COMMIT
    repo = home / "hub" / f"models--{HUB_REPO.replace('/', '--')}"
    synthesize(repo / "snapshots" / commit, "kimi-k3", "--scale", "tiny", "--layers", "4")
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)
    return home


def _name_checkpoint(tree: Path) -> None:
    (tree / ".github" / "release-checkpoint").write_text(f"checkpoint={HUB_REPO}\nrevision={HUB_COMMIT}\n")


def test_tag_mode(tmp_path, hub_cache, github):
    origin = make_origin(tmp_path / "origin", plant=_name_checkpoint)
    runner, jobs = run_workflow(
        tmp_path / "run", origin, Event("push", f"refs/tags/v{_version()}"), github,
        env={"HF_HOME": str(hub_cache), "HF_HUB_OFFLINE": "1"},
    )  # fmt: skip
    assert results(jobs) == dict.fromkeys(("stages", "github-release", "pypi", "pages"), SUCCESS), logs(jobs)
    assert runner.annotations == []
    # The GitHub release holds exactly the release artifact, uploaded with the job's token.
    release = {p.name: p.read_bytes() for p in (runner.artifacts / "release").iterdir()}
    uploads = [w for w in github.writes() if w.path.startswith(f"/uploads/repos/{OWNER}/{NAME}/")]
    assert {unquote(w.path.split("name=")[1]): w.body for w in uploads} == release
    assert all(w.headers["Authorization"] == f"token {TOKEN}" for w in github.writes())
    # PyPI: dayone itself and the four adapters, public versions, wheel and sdist each.
    assert len(runner.pypi) == 10 and f"dayone-{_version()}.tar.gz" in runner.pypi
    # Named by identity, not by where the HF cache was; no secret anywhere in what was shipped.
    # The spec is named after the model (kimi_k3, 307k parameters, 178k active), not after the repo (kimi-k3-mini).
    card = release["kimi-k3-307k-a178k-model-card.md"].decode()
    assert f"{HUB_REPO}@{HUB_COMMIT}" in card and str(hub_cache) not in card
    shipped = b"".join(release.values()) + b"".join(p.read_bytes() for p in runner.pages.rglob("*") if p.is_file())
    assert TOKEN.encode() not in shipped and HF_TOKEN.encode() not in shipped
    index = (runner.pages / "index.html").read_text()
    assert 'data-spec="kimi-k3-307k-a178k"' in index and "badge" not in index


def test_a_tag_without_a_checkpoint_fails_naming_the_file(tmp_path, github):
    origin = make_origin(tmp_path / "origin")
    runner, jobs = run_workflow(tmp_path / "run", origin, Event("push", f"refs/tags/v{_version()}"), github)
    assert jobs["stages"].result == FAILURE and jobs["github-release"].result == SKIPPED
    assert any("release-checkpoint" in a for a in runner.annotations), logs(jobs)


# -- planted defects: each must turn the run red -----------------------------------------------------------------


def _seed_from(pre_release):
    """Harness only: start the stages from the green run's stage cache (see the module docstring)."""
    _, jobs = pre_release
    green = jobs["stages"].workspace / "out" / "run"

    def seed(workspace: Path) -> None:
        shutil.copytree(green / "stages", workspace / "out" / "run" / "stages", symlinks=True)

    return {("stages", "Run the stages"): seed}


def _edit(path: str, old: str, new: str):
    def plant(tree: Path) -> None:
        text = (tree / path).read_text()
        assert old in text, f"{path}: nothing to plant ({old!r} not found)"
        (tree / path).write_text(text.replace(old, new))

    return plant


PLANTED = {
    # The package stage's build with a relative OUTDIR, run with cwd=source: the wheels went elsewhere.
    "relative-outdir": _edit("pipeline/package/build.py", "    source, out = source.absolute(), out.absolute()\n", ""),
    # PRE_RELEASE written to GITHUB_ENV and never read: the dashboard never shows the pre-release.
    "pre-release-unread": _edit(str(WORKFLOW), 'pre_release=(--pre-release "$PRE_RELEASE")', "pre_release=()"),
    # Nothing writes out/site: the site upload is empty and Pages has nothing to deploy.
    "no-site": _edit(str(WORKFLOW), 'integrate dashboard "${reports[@]}" -o out/site "${pre_release[@]}"', "true"),
}


@pytest.mark.parametrize("defect", sorted(PLANTED))
def test_each_planted_defect_turns_the_run_red(defect, tmp_path, pre_release, github):
    origin = make_origin(tmp_path / "origin", plant=PLANTED[defect])
    runner, jobs = run_workflow(tmp_path / "run", origin, DISPATCH, github, before_step=_seed_from(pre_release))
    problems = pre_release_problems(runner, jobs)
    assert problems, f"{defect}: the harness saw nothing wrong\n{logs(jobs)}"
    if defect == "relative-outdir":  # `integrate package ... -o out/pypi` (relative) is where it shows now
        steps = jobs["stages"].steps
        assert jobs["stages"].result == FAILURE and any("expected one wheel and one sdist" in s.log for s in steps)


SMALL_WORKFLOW = {
    "on": {"workflow_dispatch": {}},
    "jobs": {
        "a": {"steps": [
            {"run": 'echo "GREETING=hello" >> "$GITHUB_ENV"'},
            {"id": "s", "run": 'echo "value=$GREETING" >> "$GITHUB_OUTPUT"'},
            {"name": "check", "run": 'test "${{ steps.s.outputs.value }}" = hello'},
            {"name": "fail", "run": "exit 3"},
            {"name": "after", "run": "true"},
            {"name": "anyway", "if": "${{ !cancelled() }}", "run": 'echo done >> "$GITHUB_STEP_SUMMARY"'},
        ]},
        "b": {"needs": "a", "steps": [{"run": "true"}]},
        "c": {"needs": "a", "if": "${{ !cancelled() }}", "steps": [{"uses": "acme/unknown@v1"}]},
    },
}  # fmt: skip


def test_the_harness_runs_what_the_workflow_says(tmp_path):
    """The runner's own rules, on a small workflow: GITHUB_ENV and GITHUB_OUTPUT reach later steps, a failed step
    skips the rest but not `!cancelled()` ones, a job needing a failed one is skipped, and an unknown action fails."""
    origin = tmp_path / "origin"
    origin.mkdir()
    (origin / ".github" / "workflows").mkdir(parents=True)
    (origin / ".github" / "workflows" / "t.yml").write_text(json.dumps(SMALL_WORKFLOW))
    subprocess.run(["git", "init", "-q", "-b", "main", str(origin)], check=True)
    subprocess.run(["git", "-C", str(origin), "add", "-A"], check=True)
    subprocess.run(["git", "-C", str(origin), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "t"],
                   check=True)  # fmt: skip
    runner = Runner(tmp_path / "run", origin, "acme/t", Event("workflow_dispatch", "refs/heads/main"))
    jobs = runner.run(origin / ".github" / "workflows" / "t.yml")
    assert [(s.name, s.result) for s in jobs["a"].steps][2:] == [
        ("check", SUCCESS), ("fail", FAILURE), ("after", SKIPPED), ("anyway", SUCCESS)
    ]  # fmt: skip
    assert jobs["a"].summary == "done\n"
    assert results(jobs) == {"a": FAILURE, "b": SKIPPED, "c": FAILURE}
