"""The digest of the dayone code a stage runs, for its cache key: after an upgrade of dayone, or an edit of a module,
template or kernel, the stages that run it are rebuilt and the others are reused.

The modules a stage runs are read off its own function (function_modules: what it imports, lazily included, the
modules its global names come from, and the methods of the run's own objects it holds, such as its RunContext), and
their dayone imports are followed transitively. A stage declares only what no import shows: folders
("dayone.templates.sglang.*"), every file under a package folder (templates, scripts a peer runs, and packages whose
modules are imported by name at run time). Imports of a module are found by reading its source (the `import` and
`from ... import` lines, lazy ones inside functions included, and every string that is the whole name of a dayone
module: the programs run as `python -m dayone.programs...` and modules imported by a name held in a table), never
by importing them: a cached run stays cheap, with no torch or Triton imported. Modules are located through the
import system, so a wheel install and an editable one digest the same files.
"""

from __future__ import annotations

import ast
import dis
import hashlib
import importlib.util
import inspect
import re
from collections.abc import Callable
from functools import cache
from pathlib import Path
from types import CodeType, ModuleType

ROOT = "dayone"
_IMPORT = re.compile(r"^[ \t]*import[ \t]+(dayone(?:\.\w+)*)", re.MULTILINE)
_FROM = re.compile(
    r"^[ \t]*from[ \t]+(\.+\w*(?:\.\w+)*|dayone(?:\.\w+)*)[ \t]+import[ \t]+(\([^)]*\)|[^\n]+)", re.MULTILINE
)
_NAMED = re.compile(r"""["'](dayone(?:\.\w+)+)["']""")  # "dayone.programs.megatron.verify", as `-m` runs it


def code_digest(entries: tuple[str, ...], follow: bool = True) -> str:
    """sha256 over the relative names and contents of every file the entries reach (follow=False: the modules'
    own files, not what they import)."""
    files = code_files(entries, follow)
    h = hashlib.sha256()
    for name in sorted(files):
        h.update(name.encode() + b"\0" + _file_hash(files[name]).encode() + b"\n")
    return h.hexdigest()


def code_files(entries: tuple[str, ...], follow: bool = True) -> dict[str, Path]:
    """{module or package-relative name: file} of every file the entries reach."""
    files: dict[str, Path] = {}
    for entry in entries:
        if entry.endswith(".*"):
            folder = _package_folder(entry[:-2])
            if folder is None:
                raise ValueError(f"{entry}: no such package")
            for path in sorted(p for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
                files[f"{entry[:-2]}/{path.relative_to(folder).as_posix()}"] = path
        else:
            if _locate(entry) is None:
                raise ValueError(f"{entry}: no such module")
            for module in _closure(entry) if follow else (entry,):
                files[module] = _locate(module)
    return files


@cache
def _file_hash(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@cache
def _top(name: str) -> Path | None:
    """The folder (or file) of dayone or of a dayone.X package, as the import system maps it (package-dir)."""
    spec = importlib.util.find_spec(name)
    if spec is None:
        return None
    if spec.submodule_search_locations:
        return Path(next(iter(spec.submodule_search_locations)))
    return Path(spec.origin) if spec.origin else None


def _package_folder(name: str) -> Path | None:
    """The folder of a dayone package or of a data folder inside one (templates/sglang has no __init__.py)."""
    parts = name.split(".")
    base = _top(".".join(parts[:2])) if parts[0] == ROOT and len(parts) >= 2 else None
    if base is None or not base.is_dir():
        return None
    folder = base.joinpath(*parts[2:])
    return folder if folder.is_dir() else None


@cache
def _locate(name: str) -> Path | None:
    """The source file of a dayone module (a package's __init__.py), or None if there is none."""
    parts = name.split(".")
    if parts[0] != ROOT:
        return None
    base = _top(".".join(parts[:2])) if len(parts) >= 2 else _top(ROOT)
    if base is None:
        return None
    if base.is_file():
        return base if len(parts) == 2 else None
    for part in parts[2:]:
        base = base / part
    if (base / "__init__.py").is_file():
        return base / "__init__.py"
    return base.with_suffix(".py") if base.with_suffix(".py").is_file() else None


@cache
def _closure(entry: str) -> frozenset[str]:
    seen: set[str] = set()
    todo = [entry]
    while todo:
        module = todo.pop()
        if module in seen:
            continue
        seen.add(module)
        # A module's parents' __init__ run first when it is imported.
        parts = module.split(".")
        todo.extend(".".join(parts[:i]) for i in range(2, len(parts)) if _locate(".".join(parts[:i])))
        todo.extend(m for m in _imports(module) if m not in seen)
    return frozenset(seen)


@cache
def _imports(module: str) -> tuple[str, ...]:
    path = _locate(module)
    text = path.read_text()
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = list(_IMPORT.findall(text))
    for source, names in _FROM.findall(text):
        if source.startswith("."):
            dots = len(source) - len(source.lstrip("."))
            base = package.split(".")
            base = base[: len(base) - dots + 1]
            source = ".".join([*base, source.lstrip(".")] if source.lstrip(".") else base)
        found.append(source)
        for name in re.split(r"[,\s()]+", names.split("#")[0]):
            if name and name != "as" and name.isidentifier():
                found.append(f"{source}.{name}")  # `from pkg import submodule` imports the submodule
    found += _NAMED.findall(text)
    return tuple(m for m in dict.fromkeys(found) if _locate(m) is not None)


def function_modules(function: Callable) -> tuple[str, ...]:
    """The dayone modules a function runs, read off its bytecode: those it imports (inside it, lazily, included), and
    those its global names were imported from. A function of its own module that it calls is read the same way (its
    module's file is the stage's definition, keyed apart); nested functions and lambdas are part of it."""
    home = function.__module__
    names = _imported_names(home)
    found: dict[str, None] = {}
    todo, seen = [function.__code__, *_held_methods(function, home)], set()
    while todo:
        code = todo.pop()
        if code in seen:
            continue
        seen.add(code)
        module = None
        for ins in dis.get_instructions(code):
            if ins.opname == "IMPORT_NAME":
                module = ins.argval
                found[module] = None
            elif ins.opname == "IMPORT_FROM" and module:
                found[f"{module}.{ins.argval}"] = None  # `from pkg import submodule` imports the submodule
            elif ins.opname == "LOAD_GLOBAL":
                value = function.__globals__.get(ins.argval)
                if getattr(value, "__module__", None) == home and isinstance(
                    getattr(value, "__code__", None), CodeType
                ):
                    todo.append(value.__code__)
                elif ins.argval in names:
                    found[names[ins.argval]] = None
                elif isinstance(value, ModuleType):
                    found[value.__name__] = None
        todo.extend(c for c in code.co_consts if isinstance(c, CodeType))
    return tuple(m for m in found if m.split(".")[0] == ROOT and _locate(m) is not None)


def _held_methods(function: Callable, home: str) -> list[CodeType]:
    """The code of every method of the objects a closure holds whose class its own module defines (a stage holds its
    RunContext: `ctx.report` writes the Report, `ctx.checkpoint_digest` reads the files). Read as the stage's own."""
    codes = []
    for cell in function.__closure__ or ():
        try:
            kind = type(cell.cell_contents)
        except ValueError:  # a cell not filled yet
            continue
        if kind.__module__ != home:
            continue
        for member in vars(kind).values():
            member = getattr(member, "fget", None) or getattr(member, "func", None) or member  # property, cached one
            member = getattr(member, "__func__", member)  # staticmethod, classmethod
            if isinstance(getattr(member, "__code__", None), CodeType):
                codes.append(member.__code__)
    return codes


@cache
def _imported_names(module: str) -> dict[str, str]:
    """{name: the dayone module it comes from} for the module's top-level `from dayone.X import name` lines (constants
    included, which carry no __module__ of their own)."""
    import sys

    tree = ast.parse(inspect.getsource(sys.modules[module]))
    names = {}
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == ROOT:
            for alias in node.names:
                submodule = f"{node.module}.{alias.name}"
                names[alias.asname or alias.name] = submodule if _locate(submodule) else node.module
    return names
