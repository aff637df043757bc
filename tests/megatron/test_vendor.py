"""The copies of dayone's Megatron model in the generated packages (`dayone.adapters.megatron.vendor`), read
statically: nothing imports dayone, every third-party import is one the package declares (the framework through its
extra), and every copied module is reachable by its relative imports."""

from __future__ import annotations

import ast
import sys

import pytest
from dayone.adapters.megatron import vendor
from dayone.adapters.targets import common, megatron_bridge, miles
from dayone.spec.registry import load_spec

FRAMEWORK = {"megatron"}


@pytest.mark.parametrize("generator", [miles, megatron_bridge], ids=["miles", "megatron-bridge"])
def test_copies_import_only_what_the_package_declares(generator):
    spec = load_spec("kimi-k3")
    files = generator.files(spec)
    package = common.package_name(spec, generator.TARGET)
    imported: set[str] = set()
    relative = 0
    for rel, text in files.items():
        if not (rel.endswith(".py") and rel.startswith(f"{package}/")):
            continue
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Import):
                imported |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                imported.add(node.module.split(".")[0])
            elif isinstance(node, ast.ImportFrom):
                relative += 1
    third_party = imported - set(sys.stdlib_module_names) - {package}
    assert not any(name == "dayone" for name in third_party)
    declared = {r.split(">")[0].split("=")[0] for r in vendor.REQUIREMENTS}
    assert third_party <= declared | FRAMEWORK, third_party - declared - FRAMEWORK
    assert {"torch", "triton", "pydantic"} <= third_party  # each declared requirement is used
    assert relative > 50
    assert f"{package}/_dayone/adapters/megatron/layer_specs.py" in files
    assert f"{package}/_dayone/kernels/kda/torch_chunk_autograd.py" in files


def test_relative_imports_climb_to_the_copied_root():
    assert vendor.relative_imports("from dayone.kernels.dispatch import x\n", "dayone.kernels.situ.ops", False) == (
        "from ...kernels.dispatch import x\n"
    )
    assert vendor.relative_imports("    from dayone.spec.schema import S\n", "dayone.kernels.kda", True) == (
        "    from ...spec.schema import S\n"
    )
