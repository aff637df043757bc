"""The source of the Megatron model, rendered into a generated package so that it runs without dayone installed.

Miles' `--spec` plugin and Megatron-Bridge's provider build the layers of `dayone.adapters.megatron`; a trainer's
environment has megatron-core, torch, Triton and pydantic, not dayone. At generation time the modules those layers
import are copied, whole, under `<package>/_dayone/` (dayone's own module tree, so the copies read as the originals)
with their `dayone.` imports made relative (so they point there). The modules are found by reading imports (nothing is executed): the
closure of ROOTS over absolute `dayone.` imports, lazy ones inside functions included. A package folder on the way
gets its real `__init__.py` only when a copied module imports a name from it (`from dayone.kernels.kda import
chunk_kda`); otherwise an empty one, so `dayone.adapters.model`'s whole reference tier is not pulled in for one norm.

One source of truth: the copies are dayone's files at generation time, regenerated with the package.
"""

from __future__ import annotations

import ast
import importlib.util
import re
from pathlib import Path

# What the generated packages import: the layer specs (Miles' plugin, Megatron-Bridge's provider), the config fields
# the spec implies, the model builder and the CPU stand-ins the standalone checks use.
ROOTS = (
    "dayone.adapters.megatron.layer_specs",
    "dayone.adapters.megatron.config",
    "dayone.adapters.megatron.model",
    "dayone.adapters.megatron.cpu",
    "dayone.spec.schema",
)
FOLDER = "_dayone"
# The third-party modules the copies may import; the generated pyproject declares them (`REQUIREMENTS`).
THIRD_PARTY = {"torch", "triton", "pydantic", "megatron"}
REQUIREMENTS = ("torch", "triton", "pydantic>=2.7")
_FROM = re.compile(r"^(\s*)from dayone\.", re.MULTILINE)
# The copies are dayone's code under dayone's lint rules; the generated packages are checked with more
# (`integrate generate --check`: E, F, W, I, B, UP), of which dayone's code breaks one: single-letter sizes (`I`).
LINT_EXEMPTION = "# ruff: noqa: E741\n"


def _origin(module: str) -> Path | None:
    spec = importlib.util.find_spec(module)
    return Path(spec.origin) if spec is not None and spec.origin and spec.origin.endswith(".py") else None


def _is_package(module: str) -> bool:
    path = _origin(module)
    return path is not None and path.name == "__init__.py"


def _imports(module: str) -> tuple[set[str], set[str]]:
    """(dayone modules `module` imports, dayone packages it imports names from)."""
    tree = ast.parse(_origin(module).read_text())
    modules, packages = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] == "dayone" for a in node.names):
            raise ValueError(f"{module}: `import dayone...` (line {node.lineno}); the copies rewrite `from` imports")
        elif isinstance(node, ast.ImportFrom) and node.level:
            raise ValueError(f"{module}: relative import (line {node.lineno}); the copies resolve absolute ones")
        elif isinstance(node, ast.ImportFrom) and node.module.split(".")[0] == "dayone":
            package = _is_package(node.module)
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                if package and _origin(sub) is not None:
                    modules.add(sub)
                else:
                    modules.add(node.module)
                    if package:
                        packages.add(node.module)
    return modules, packages


def closure(roots=ROOTS) -> tuple[list[str], set[str]]:
    """(every dayone module `roots` import, transitively; the packages whose real __init__ is needed), sorted."""
    seen: set[str] = set()
    real_inits: set[str] = set()
    todo = list(roots)
    while todo:
        module = todo.pop()
        if module in seen:
            continue
        seen.add(module)
        modules, packages = _imports(module)
        real_inits |= packages
        todo += modules | packages
    return sorted(seen), real_inits


def relative_imports(text: str, module: str, is_package: bool) -> str:
    """`from dayone.x import y` -> `from ...x import y`, relative to the copy of `module` (a package's __init__ when
    is_package): the copies import each other wherever the package is installed, and an import sorter sees them as
    one local block, whether it reads them from a file or from standard input."""
    depth = module.count(".") + (1 if is_package else 0)  # dots from the module's package up to `dayone`
    return _FROM.sub(rf"\1from {'.' * depth}", text)


def vendored_files(header) -> dict[str, str]:
    """{path under the package folder: text} for `<package>/_dayone/...`; header(what) -> the generated header."""
    modules, real_inits = closure()
    files: dict[str, str] = {}
    folders: set[tuple[str, ...]] = {()}
    for module in modules:
        parts = tuple(module.split(".")[1:])
        path = _origin(module)
        if path.name == "__init__.py":
            if module not in real_inits:
                continue  # only imported through: an empty __init__ below
            rel = (*parts, "__init__.py")
            folders.add(parts)
        else:
            rel = (*parts[:-1], f"{parts[-1]}.py")
        folders |= {parts[:i] for i in range(len(parts))}
        text = relative_imports(path.read_text(), module, path.name == "__init__.py")
        files["/".join((FOLDER, *rel))] = header(f"copy of {module}") + LINT_EXEMPTION + text
    for folder in folders:
        init = "/".join((FOLDER, *folder, "__init__.py"))
        if init not in files:
            name = ".".join(("dayone", *folder))
            files[init] = (
                header(f"package folder of the copy of {name}") + f'"""{name}, as far as the copies use it."""\n'
            )
    return files


def packages(package: str, files: dict[str, str]) -> list[str]:
    """The import packages of the copies (setuptools lists each), the package itself first."""
    inits = sorted(rel.removesuffix("/__init__.py").replace("/", ".") for rel in files if rel.endswith("__init__.py"))
    return [package, *(f"{package}.{name}" for name in inits)]
