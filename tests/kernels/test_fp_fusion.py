"""FP fusion (a*b+c as one FMA) is asked for by every launch and by the compile stage, never through the
environment: importing the kernels changes no environment variable (the CLI entry owns the process environment)."""

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import dayone.kernels
import pytest
from dayone.compile_stage import KERNEL_PACKAGES
from dayone.kernels import aot
from dayone.kernels.specialization import Specialization

ROOT = Path(dayone.kernels.__file__).parent


def test_importing_the_kernels_leaves_the_environment_unchanged():
    modules = ["dayone.kernels", "dayone.kernels.aot", "dayone.kernels.autotune"]
    modules += [f"dayone.kernels.{op}{part}" for op in KERNEL_PACKAGES for part in ("", ".aot")]
    script = (
        "import json, os\n"
        "before = dict(os.environ)\n"
        f"for name in {modules!r}:\n"
        "    __import__(name)\n"
        "after = dict(os.environ)\n"
        "print(json.dumps({k: [before.get(k), after.get(k)] for k in before.keys() | after.keys()"
        " if before.get(k) != after.get(k)}))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "TRITON_DEFAULT_FP_FUSION"}
    run = subprocess.run([sys.executable, "-P", "-c", script], env=env, capture_output=True, text=True, check=True)
    assert json.loads(run.stdout.strip().splitlines()[-1]) == {}


def _launches(path: Path) -> list[ast.Call]:
    """Every `kernel[grid](...)` call in one source file."""
    return [
        node
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Subscript)
    ]


def test_every_launch_asks_for_fp_fusion():
    launches = [(path, call) for path in sorted(ROOT.rglob("*.py")) for call in _launches(path)]
    # the ops' launches (13) and the autotuner's: a walk that found none would prove nothing
    assert len(launches) >= 14, [f"{p.relative_to(ROOT)}:{c.lineno}" for p, c in launches]
    for path, call in launches:
        fusion = [kw.value for kw in call.keywords if kw.arg == "enable_fp_fusion"]
        where = f"{path.relative_to(ROOT)}:{call.lineno}"
        assert len(fusion) == 1, f"{where} launches without enable_fp_fusion"
        assert isinstance(fusion[0], ast.Constant) and fusion[0].value is True, f"{where}: enable_fp_fusion not True"


def _spec() -> Specialization:
    from dayone.kernels.gated_rmsnorm.aot import specializations
    from dayone.kernels.specialization import KernelDims

    return specializations(KernelDims(hidden_size=64, kda_num_heads=2, kda_head_dim=32, kda_gate="safe"))[0]


def test_the_compile_stage_asks_for_fp_fusion(monkeypatch):
    triton = pytest.importorskip("triton")
    spec = _spec()
    assert aot.compile_options(spec) == {
        "num_warps": spec.num_warps,
        "num_stages": spec.num_stages,
        "enable_fp_fusion": True,
    }
    seen = {}

    def fake_compile(src, target, options):
        seen.update(options)
        raise RuntimeError("stop here: only the options are checked")

    monkeypatch.setattr(triton, "compile", fake_compile)
    with pytest.raises(aot.AotError, match="stop here"):
        aot._compile_one(spec, "sm_90")
    assert seen == aot.compile_options(spec)
