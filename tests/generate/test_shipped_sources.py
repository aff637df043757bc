"""The sources dayone ships verbatim inside every generated engine package (the weight-map walker and loader, the
MXFP4 reference, the CPU paths' references) run in the engine's environment, where dayone is not installed: each
imports only the standard library, torch, and the other files shipped beside it (relatively)."""

from __future__ import annotations

import ast
import importlib.util
import sys
from pathlib import Path

import pytest
from dayone.adapters.targets import common

SHIPPED = {
    **common.SHIPPED,
    **{name: module for part in common.CPU_REFERENCES.values() for name, module in part.items()},
}
ALLOWED = {"torch", "__future__"}


def imports(path: Path) -> list[tuple[int, str]]:
    """(level, module) of every import in the file: level 0 absolute, > 0 relative."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [(0, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            found.append((node.level, node.module or ""))
    return found


@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_a_shipped_source_needs_nothing_of_dayone(name):
    path = Path(importlib.util.find_spec(SHIPPED[name]).origin)
    siblings = {Path(file).stem for file in SHIPPED}
    for level, module in imports(path):
        top = module.split(".")[0]
        if level:
            assert level == 1 and top in siblings, f"{name}: from {'.' * level}{module} is not shipped beside it"
        else:
            assert top in ALLOWED or top in sys.stdlib_module_names, f"{name} imports {module}, absent in an engine"
