"""Miles' own weight-sync converter entry, imported from a Miles tree at the pinned commit.

    convert_to_hf = miles_convert_to_hf(tree)   # tree: a folder holding `miles/` (the dispatch patch applied)
    pairs = convert_to_hf(args, model_name, "module.module." + name, param)   # as Miles' weight sync calls it

The entry is `convert_to_hf` in miles/backends/megatron_utils/megatron_to_hf/__init__.py: it strips vocabulary
padding, dispatches on the model name to a converter, and quantizes (not with quantization_config None). The tree
needs only the files that path runs (tests/data/vendor/miles-c7969ad1f holds them, byte for byte). Every other
module the dispatch imports relatively (Miles' converters for other models, the quantizers) is stood in for by a
module whose functions raise, naming themselves: they are absent on purpose, since with the patch Miles dispatches
the package's name to the package's converter first. A dispatch that reaches one of them fails loudly instead of
converting.
"""

from __future__ import annotations

import ast
import importlib
import sys
import types
from collections.abc import Callable
from pathlib import Path

DISPATCH = "miles.backends.megatron_utils.megatron_to_hf"


class NotVendored(RuntimeError):
    """A Miles function outside the vendored tree was called: `.function` names it."""

    def __init__(self, function: str) -> None:
        super().__init__(f"Miles' {function} was called: it is not in the vendored tree (the dispatch went past ours)")
        self.function = function


def _stand_in(module: str, names: list[str]) -> types.ModuleType:
    stand_in = types.ModuleType(module)

    def raiser(qualified: str):
        def call(*args, **kwargs):
            raise NotVendored(qualified)

        return call

    for name in names:
        setattr(stand_in, name, raiser(f"{module}.{name}"))
    return stand_in


def _absent_relative_imports(package: str, folder: Path) -> dict[str, list[str]]:
    """{absolute module: [imported names]} for each `from .x import a, b` in the package's __init__.py whose
    module file or folder is not in the tree."""
    absent: dict[str, list[str]] = {}
    for node in ast.walk(ast.parse((folder / "__init__.py").read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module:
            here = folder / node.module.replace(".", "/")
            if not here.with_suffix(".py").is_file() and not (here / "__init__.py").is_file():
                absent[f"{package}.{node.module}"] = [alias.name for alias in node.names]
    return absent


def miles_convert_to_hf(tree: Path) -> Callable:
    """Import the dispatch package from `tree` (put first on sys.path) with stand-ins for the absent modules, and
    return its `convert_to_hf`. Importing it twice in one process is refused: the module is cached."""
    if DISPATCH in sys.modules:
        raise RuntimeError(f"{DISPATCH} is already imported in this process")
    root = tree / DISPATCH.replace(".", "/")
    for package, folder in ((DISPATCH, root), (f"{DISPATCH}.processors", root / "processors")):
        for module, names in _absent_relative_imports(package, folder).items():
            sys.modules[module] = _stand_in(module, names)
    sys.path.insert(0, str(tree))
    return importlib.import_module(DISPATCH).convert_to_hf
