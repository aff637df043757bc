"""dayone.package.pep517 (the package stage's build: PyPA build's library, each hook in a fork) makes the files
`python -m build --no-isolation` makes, byte for byte, and a hook that fails fails the build with its reason."""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from dayone.package.build import BuildError, run_build

EPOCH = 1700000000
PYPROJECT = """[build-system]
requires = ["setuptools>=77"]
build-backend = "setuptools.build_meta"

[project]
name = "dayone-sample"
version = "0.1.0"
description = "a staged tree like the package stage's"
requires-python = ">=3.10"
entry-points = {"vllm.general_plugins" = {"sample" = "dayone_sample:register"}}

[tool.setuptools]
packages = ["dayone_sample"]
package-data = {"dayone_sample" = ["scripts/models/*.py"]}
"""


def staged_tree(root: Path, pyproject: str = PYPROJECT) -> Path:
    (root / "dayone_sample" / "scripts" / "models").mkdir(parents=True)
    (root / "dayone_sample" / "__init__.py").write_text("def register():\n    return None\n")
    (root / "dayone_sample" / "scripts" / "models" / "sample.py").write_text("MODEL = 'sample'\n")
    (root / "README.md").write_text("# sample\n")
    (root / "pyproject.toml").write_text(pyproject)
    return root


def command_build(source: Path, out: Path) -> dict[str, bytes]:
    """What the command itself makes of the tree (the reference: the files the package stage used to ship)."""
    subprocess.run([sys.executable, "-P", "-m", "build", "--no-isolation", "--outdir", str(out), str(source)],
                   cwd=source, env={**os.environ, "SOURCE_DATE_EPOCH": str(EPOCH)}, check=True, capture_output=True)  # fmt: skip
    return {p.name: p.read_bytes() for p in out.iterdir()}


def test_the_files_are_the_commands_byte_for_byte(tmp_path, monkeypatch):
    monkeypatch.setenv("SOURCE_DATE_EPOCH", str(EPOCH))
    reference = command_build(staged_tree(tmp_path / "a"), tmp_path / "by-command")
    wheel, sdist = run_build(staged_tree(tmp_path / "b"), tmp_path / "by-stage", EPOCH, "dayone-sample")
    assert {wheel.name, sdist.name} == set(reference)
    assert wheel.read_bytes() == reference[wheel.name]
    # the stage rewrites the sdist's tarball (normalise_sdist); its members are the command's
    with tarfile.open(sdist) as ours, tarfile.open(tmp_path / "by-command" / sdist.name) as theirs:
        assert sorted(m.name for m in ours.getmembers()) == sorted(m.name for m in theirs.getmembers())
        for member in ours.getmembers():
            if member.isfile():
                assert ours.extractfile(member).read() == theirs.extractfile(member.name).read(), member.name


def test_a_failing_hook_fails_the_build_with_its_reason(tmp_path):
    broken = PYPROJECT.replace('packages = ["dayone_sample"]', 'packages = ["not_there"]')
    with pytest.raises(BuildError) as failed:
        run_build(staged_tree(tmp_path / "src", broken), tmp_path / "out", EPOCH, "dayone-sample")
    assert str(failed.value).startswith("dayone-sample: the build failed: ")
    assert "not_there" in failed.value.log
    assert not list((tmp_path / "out").iterdir())
