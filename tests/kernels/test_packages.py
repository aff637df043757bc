"""Kernel packages are as thin as fla's: __init__ exports the public ops and defines nothing; the compile stage's
tables live in <op>/aot.py, which importing the public op does not load."""

import ast
import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import dayone.kernels
import pytest
from dayone.compile_stage import KERNEL_PACKAGES

ROOT = Path(dayone.kernels.__file__).parent


@pytest.mark.parametrize("op", KERNEL_PACKAGES)
def test_init_only_exports(op):
    tree = ast.parse((ROOT / op / "__init__.py").read_text())
    body = tree.body[1:] if ast.get_docstring(tree) else tree.body
    for node in body:
        is_all = isinstance(node, ast.Assign) and [t.id for t in node.targets] == ["__all__"]
        assert isinstance(node, ast.ImportFrom) or is_all, f"{op}/__init__.py line {node.lineno} defines something"
    package = importlib.import_module(f"dayone.kernels.{op}")
    assert package.__all__ and all(callable(getattr(package, name)) for name in package.__all__)
    assert not {"specializations", "candidates"} & set(package.__all__)
    aot = importlib.import_module(f"dayone.kernels.{op}.aot")
    assert callable(aot.specializations)


def test_the_public_ops_do_not_load_the_compile_tables():
    script = (
        "import json, sys\n"
        f"for op in {list(KERNEL_PACKAGES)!r}:\n"
        "    __import__(f'dayone.kernels.{op}')\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.endswith('.aot') or m == 'dayone.kernels.autotune')))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    run = subprocess.run([sys.executable, "-P", "-c", script], env=env, capture_output=True, text=True, check=True)
    assert json.loads(run.stdout.strip().splitlines()[-1]) == []
