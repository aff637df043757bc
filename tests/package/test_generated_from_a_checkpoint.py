"""Adapters generated from a checkpoint (no shipped spec, no spec file given): the generated headers name a command
that, run as written where they say, writes every file again byte for byte; `integrate package` needs no --spec."""

from __future__ import annotations

import json
import re
from pathlib import Path

from checkpoints import synthesize
from cli_runner import integrate

ONE_THREAD = {"OMP_NUM_THREADS": "1"}


def test_header_command_reproduces_the_files_and_package_needs_no_spec(tmp_path):
    checkpoint = tmp_path / "CK"  # a folder name unlike the model's: nothing below may depend on it
    synthesize(checkpoint, "kimi-k3", "--scale", "tiny", "--layers", "4", "--shards", "1")
    out = tmp_path / "gen"
    assert integrate("generate", checkpoint, "--target", "sglang", "-o", out, env=ONE_THREAD).code == 0
    before = _tree(out)
    init = next((out / "sglang").glob("*/__init__.py")).read_text()
    assert str(tmp_path) not in init  # no local path in generated code
    command = re.search(r"^# for byte: (integrate .*)$", init, re.MULTILINE).group(1)
    assert command == "integrate generate spec.yaml -o ."
    # "in the folder that holds this target's folder": out. Run as written (all targets), from a copy moved away
    # from the checkpoint, which is not needed.
    moved = tmp_path / "elsewhere"
    out.rename(moved)
    checkpoint.rename(tmp_path / "gone")
    rerun = integrate(*command.split()[1:], cwd=moved, env=ONE_THREAD)
    assert rerun.code == 0, rerun.err
    after = _tree(moved)
    assert {name: after[name] for name in before} == before  # byte for byte
    assert set(after) > set(before)  # and the other targets, which `-o .` writes too

    dist = tmp_path / "dist"
    packaged = integrate("package", moved, "-o", dist, "--json", env=ONE_THREAD)
    assert packaged.code == 0, packaged.err
    assert {p["target"] for p in json.loads(packaged.out)["packages"]} == {"sglang", "vllm", "miles",
                                                                          "megatron-bridge"}  # fmt: skip


def test_a_shipped_specs_header_names_the_spec(tmp_path):
    out = tmp_path / "gen"
    assert integrate("generate", "kimi-linear-48b-a3b", "--target", "vllm", "-o", out).code == 0
    init = next((out / "vllm").glob("*/__init__.py")).read_text()
    assert "# for byte: integrate generate kimi-linear-48b-a3b -o .\n" in init
    assert not (out / "spec.yaml").exists()


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}
