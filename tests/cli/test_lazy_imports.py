"""Commands that need no tensor maths never import torch or triton (importing them is most of a short command's
start-up): `--help`, `spec *`, `inspect`, `plan`, `package`, `publish`, `dashboard`, and a fully cached `compile` and
`run`. Each runs as a fresh process, the way a user runs it, on real inputs; a watcher on the import system records
where torch or triton would first have been imported, so a failure shows the import chain."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from checkpoints import synthesize
from cli_runner import integrate

# Runs `integrate ARGS` with a meta-path watcher in front; at exit, writes {module: stack} for the first import of
# each heavy package (the import itself goes ahead: the command must behave exactly as it does for a user).
DRIVER = """
import atexit, json, os, sys, traceback
first = {}

class Watch:
    def find_spec(self, name, path=None, target=None):
        root = name.partition(".")[0]
        if root in ("torch", "triton") and root not in first:
            frames = traceback.format_stack()[:-1]
            first[root] = "".join(f for f in frames if "<frozen importlib" not in f)
        return None

sys.meta_path.insert(0, Watch())
atexit.register(lambda: open(os.environ["IMPORTS_REPORT"], "w").write(json.dumps(first)))
sys.argv = ["integrate", *sys.argv[1:]]
from dayone.cli import main
main()
"""


def heavy_imports(
    tmp_path: Path, *args, python=sys.executable, cwd=None, env=None, code=0
) -> tuple[dict[str, str], str]:
    """Run `integrate ARGS` (exit `code` required): ({heavy package: where it was first imported}, stdout)."""
    report = tmp_path / f"imports-{len(list(tmp_path.glob('imports-*')))}.json"
    full_env = {**(env or os.environ), "IMPORTS_REPORT": str(report)}
    full_env.pop("TRITON_INTERPRET", None)
    proc = subprocess.run([python, "-c", DRIVER, *map(str, args)], capture_output=True, text=True, cwd=cwd,
                          env=full_env, timeout=600, check=False)  # fmt: skip
    assert proc.returncode == code, proc.stdout[-2000:] + proc.stderr[-3000:]
    return json.loads(report.read_text()), proc.stdout


def assert_light(run: tuple[dict[str, str], str]) -> None:
    found, _ = run
    assert not found, "\n\n".join(f"{name} imported from:\n{stack}" for name, stack in found.items())


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("tiny") / "kimi-k3-tiny"
    return synthesize(path, "kimi-k3", "--scale", "tiny", "--layers", "4")


@pytest.mark.parametrize(
    "args",
    [
        ("--help",),
        ("spec", "list"),
        ("spec", "show", "kimi-k3"),
        ("spec", "schema"),
        ("plan", "kimi-k3", "--gpus", "16", "--json"),
    ],  # 16: it fits (on 8 H200s it does not: exit 1)
    ids=["help", "spec-list", "spec-show", "spec-schema", "plan"],
)
def test_commands_without_inputs(tmp_path, args):
    assert_light(heavy_imports(tmp_path, *args))


def test_spec_derive_and_inspect(tmp_path, tiny):
    assert_light(heavy_imports(tmp_path, "spec", "derive", tiny, "-o", tmp_path / "spec.yaml"))
    assert_light(heavy_imports(tmp_path, "inspect", tiny))
    assert_light(heavy_imports(tmp_path, "inspect", tiny, "--json", "--spec", tmp_path / "spec.yaml"))


def test_validate_refuses_a_missing_checkpoint_before_the_numerics(tmp_path):
    """Bad input is answered at once: validate reads the checkpoint before it imports torch (2 s) for the numbers."""
    assert_light(heavy_imports(tmp_path, "validate", tmp_path / "absent", code=2))


def test_package_publish_dashboard(tmp_path):
    generated, dist = tmp_path / "generated", tmp_path / "dist"
    assert integrate("generate", "kimi-k3", "--target", "sglang", "-o", generated).code == 0
    assert_light(heavy_imports(tmp_path, "package", generated, "-o", dist, "--report", tmp_path / "package.json"))
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "release"))
    from fake_github import FakeGitHub

    with FakeGitHub("acme", "kimi") as github:
        env = {**os.environ, "GITHUB_TOKEN": "ghp_lazy_imports_test"}
        publish = ("publish", dist, "--repo", "acme/kimi", "--tag", "v1", "--api-url", github.url)
        assert_light(heavy_imports(tmp_path, *publish, env=env))
        assert any(r.method == "POST" for r in github.writes())  # the release was created, assets uploaded
    assert_light(heavy_imports(tmp_path, "dashboard", tmp_path / "package.json", "-o", tmp_path / "site"))
    assert (tmp_path / "site" / "index.html").is_file()


def test_fully_cached_compile(tmp_path, k3_build):
    assert_light(heavy_imports(tmp_path, *k3_build.args))
    assert all(row["cached"] for row in json.loads((k3_build.out / "resources.json").read_text())["kernels"])


def test_fully_cached_run(tmp_path, readme_demo):
    """The README's demo run again with nothing changed: every stage is reused and nothing heavy is imported."""
    from readme_demo import quiet_env

    assert readme_demo.code == 0, readme_demo.stderr[-2000:]
    python = readme_demo.clone / ".venv" / "bin" / "python"
    env = quiet_env(SOURCE_DATE_EPOCH=readme_demo.epoch)
    found, out = heavy_imports(tmp_path, "run", "--demo", "-o", "out/demo", python=python, cwd=readme_demo.clone,
                               env=env)  # fmt: skip
    stages = [cells for cells in (line.split("│")[1:-1] for line in out.splitlines() if line.startswith("│"))
              if cells[0].strip()]  # fmt: skip
    assert len(stages) > 5 and all(cells[2].strip() == "cached" for cells in stages), out  # every stage reused
    assert_light((found, out))
