"""Fresh checkouts of this repository, each with a .venv whose `integrate` runs that checkout's own code, and the
README's first command run exactly as written in one of them: one run per test session, shared by the tests that
read its outputs (the run's own tests, the release-workflow harness, the location comparison).

A checkout is `git clone` of HEAD plus the working tree's uncommitted changes (so it holds what is being tested;
in CI the two are the same). Its .venv is the test environment layered, not rebuilt (.ci/setup is not rerun): a
venv whose site-packages point at the test venv's packages through a .pth file, with dayone installed editable from
the checkout. The test venv's own editable dayone is not seen there (a path added by a .pth file does not have its
own .pth files read), so every `integrate` in a checkout runs that checkout's code, templates and stage keys.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
README_RUN = ".venv/bin/integrate run --demo -o out/demo"


@dataclass
class DemoRun:
    clone: Path
    out: Path  # clone / "out/demo"
    code: int
    stdout: str
    stderr: str
    epoch: str
    seconds: float

    def integrate(self, *args: str, env: dict | None = None, cwd: Path | None = None, clone: Path | None = None):
        """`integrate ARGS` with a checkout's own .venv (this run's by default), in the checkout."""
        root = clone or self.clone
        return subprocess.run([str(root / ".venv" / "bin" / "integrate"), *map(str, args)], cwd=cwd or root,
                              env=quiet_env(SOURCE_DATE_EPOCH=self.epoch, **(env or {})), capture_output=True,
                              text=True, timeout=900, check=False)  # fmt: skip


def git(*args: str, cwd: Path = REPO) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


def fresh_checkout(dest: Path) -> Path:
    """`git clone` of this repository with the working tree's changes on top, and its own layered .venv."""
    checkout_tree(dest)
    make_venv(dest)
    return dest


def checkout_tree(dest: Path, repo: Path = REPO) -> Path:
    """`git clone` of a repository (this one by default) with its working tree's changes on top (uncommitted)."""
    git("clone", "-q", str(repo), str(dest))
    changed = git("ls-files", "-z", "--modified", "--others", "--exclude-standard", cwd=repo).split("\0")
    for rel in filter(None, changed):
        src = repo / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    for rel in filter(None, git("ls-files", "-z", "--deleted", cwd=repo).split("\0")):
        (dest / rel).unlink(missing_ok=True)
    return dest


def layered_venv(venv: Path) -> None:
    """A venv of this Python that sees the test venv's packages (not its dayone) and has none of its own."""
    subprocess.run([sys._base_executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    purelib = Path(sysconfig.get_paths(vars={"base": str(venv), "platbase": str(venv)})["purelib"])
    (purelib / "dayone-test-env.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")


def make_venv(checkout: Path) -> None:
    venv = checkout / ".venv"
    layered_venv(venv)
    peers = REPO / ".venv" / "peers"
    if peers.is_dir():
        (venv / "peers").symlink_to(peers)  # framework peer environments, as .ci/setup.d made them
    subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--no-deps", "--no-index",
                    "--no-build-isolation", "-e", str(checkout)], check=True, capture_output=True)  # fmt: skip


def commit_epoch(checkout: Path) -> str:
    """The commit time, as the release workflow sets SOURCE_DATE_EPOCH: two runs of one commit compare byte for byte."""
    return git("log", "-1", "--format=%ct", cwd=checkout).strip()


def quiet_env(**extra: str) -> dict[str, str]:
    env = {**os.environ, **extra}
    for name in ("TRITON_INTERPRET", "VIRTUAL_ENV", "PYTHONPATH"):
        env.pop(name, None)
    return env


@pytest.fixture(scope="session")
def readme_demo(tmp_path_factory) -> DemoRun:
    import time

    clone = fresh_checkout(tmp_path_factory.mktemp("readme") / "dayone")
    epoch = commit_epoch(clone)
    start = time.perf_counter()
    proc = subprocess.run(["bash", "-c", README_RUN], cwd=clone, env=quiet_env(SOURCE_DATE_EPOCH=epoch),
                          capture_output=True, text=True, timeout=1800, check=False)  # fmt: skip
    seconds = time.perf_counter() - start
    return DemoRun(clone, clone / "out" / "demo", proc.returncode, proc.stdout, proc.stderr, epoch, seconds)
