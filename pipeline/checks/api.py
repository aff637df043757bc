"""Check generated code against a framework release's source, by parsing it (nothing imported or executed).

For every `from <framework>... import name` in a generated file: the module exists in the release and defines,
imports or lazily exports `name`. For every call of such a name (or of an attribute of it, or of what a factory
function it names returns): each keyword is a parameter of the callee (its `__init__`, dataclass fields along its
bases, or the function), and the positional arguments fit.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from functools import cache, cached_property
from pathlib import Path

FRAMEWORKS = ("sglang", "vllm", "megatron")


@cache
def _parse_file(path: str, mtime_ns: int, size: int) -> ast.Module:
    """A release's source file parsed once a process, however many trees read it (the two Megatron targets share
    megatron-core; a test checks nine layouts of four targets): only read, never changed, by the checks. Keyed by
    the file's modification time and size too, so an edited file is parsed again."""
    return ast.parse(Path(path).read_text(errors="replace"))


def _stamp(path: Path) -> tuple[int, int]:
    stat = path.stat()
    return stat.st_mtime_ns, stat.st_size


@dataclass(frozen=True)
class Definition:
    module: str
    node: ast.AST | None  # ClassDef / FunctionDef / AsyncFunctionDef / Assign, or None for a module
    kind: str  # "class", "function", "value", "module"


@dataclass(frozen=True)
class Signature:
    names: frozenset[str]
    positional: int | None  # how many positional arguments fit (None: any, *args)
    any_keyword: bool  # **kwargs


class SourceTree:
    """The parsed modules of one or more releases (roots searched in order)."""

    def __init__(self, roots: list[Path]) -> None:
        self.roots = roots
        self._parsed: dict[str, ast.Module | None] = {}

    def path(self, module: str) -> Path | None:
        rel = Path(*module.split("."))
        for root in self.roots:
            for candidate in (root / rel.with_suffix(".py"), root / rel / "__init__.py"):
                if candidate.is_file():
                    return candidate
        return None

    def is_package(self, module: str) -> bool:
        path = self.path(module)
        return path is not None and path.name == "__init__.py"

    def parse(self, module: str) -> ast.Module | None:
        if module not in self._parsed:
            path = self.path(module)
            self._parsed[module] = _parse_file(str(path), *_stamp(path)) if path else None
        return self._parsed[module]

    def lookup(self, module: str, name: str, depth: int = 0) -> Definition | None:
        """Where `module.name` is defined, following re-exports, star imports and lazy `module:attr` tables."""
        tree = self.parse(module)
        if tree is None or depth > 12:
            return None
        for node in _top_level(tree.body):
            found = self._match(module, node, name, depth)
            if found is not None:
                return found
        if self.path(f"{module}.{name}") is not None:
            return Definition(f"{module}.{name}", None, "module")
        for node in _top_level(tree.body):
            if isinstance(node, ast.ImportFrom) and any(a.name == "*" for a in node.names):
                source = self._absolute(module, node)
                exported = self.exports(source)
                if exported is not None and name not in exported:
                    continue  # `import *` takes only the names of the source's __all__
                found = self.lookup(source, name, depth + 1)
                if found is not None:
                    return found
        return self._lazy(module, tree, name, depth)

    def exports(self, module: str) -> set[str] | None:
        """The names of a module's literal `__all__` (what `from module import *` takes), None without one."""
        tree = self.parse(module)
        if tree is None:
            return None
        names: set[str] | None = None
        for node in _top_level(tree.body):
            targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
            if not any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
                continue
            value = node.value
            if isinstance(value, ast.List | ast.Tuple):  # `__all__ = [...]` or `__all__ += [...]`
                names = (names or set()) | {e.value for e in value.elts if isinstance(e, ast.Constant)}
            else:
                return None  # computed: not judged
        return names

    def _match(self, module: str, node: ast.AST, name: str, depth: int) -> Definition | None:
        if isinstance(node, ast.ClassDef) and node.name == name:
            return Definition(module, node, "class")
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == name:
            return Definition(module, node, "function")
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            return Definition(module, node, "value")
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == name:
            return Definition(module, node, "value")
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if (alias.asname or alias.name) == name and alias.name != "*":
                    source = self._absolute(module, node)
                    return self.lookup(source, alias.name, depth + 1) or Definition(source, None, "value")
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname == name:
                    return Definition(alias.name, None, "module")
        return None

    def _absolute(self, module: str, node: ast.ImportFrom) -> str:
        if not node.level:
            return node.module or ""
        base = module.split(".") if self.is_package(module) else module.split(".")[:-1]
        base = base[: len(base) - (node.level - 1)]
        return ".".join(base + ([node.module] if node.module else []))

    def _lazy(self, module: str, tree: ast.Module, name: str, depth: int) -> Definition | None:
        """A module-level `__getattr__` serving names from a dict literal of "module:attr" strings (vLLM)."""
        if not any(isinstance(n, ast.FunctionDef) and n.name == "__getattr__" for n in tree.body):
            return None
        for node in _top_level(tree.body):
            if isinstance(node, ast.Assign | ast.AnnAssign) and isinstance(node.value, ast.Dict):
                for key, value in zip(node.value.keys, node.value.values):
                    if isinstance(key, ast.Constant) and key.value == name and isinstance(value, ast.Constant):
                        target, _, attr = str(value.value).partition(":")
                        if target.startswith("."):
                            target = module + target if self.is_package(module) else target
                        found = self.lookup(target, attr or name, depth + 1)
                        if found is not None:
                            return found
        return None

    # ----- signatures

    def signature(self, definition: Definition, depth: int = 0) -> Signature | None:
        """The parameters a call of `definition` accepts (None: unknown, not judged)."""
        node = definition.node
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            return _signature(node.args, skip_self=False)
        if not isinstance(node, ast.ClassDef) or depth > 12:
            return None
        init = _method(node, "__init__")
        if init is not None:
            return _signature(init.args, skip_self=True)
        if _is_dataclass(node):
            fields = self._fields(definition, depth)
            return None if fields is None else Signature(frozenset(fields), None, False)
        for base in self.bases(definition):
            sig = self.signature(base, depth + 1)
            if sig is not None:
                return sig
        return None

    def bases(self, definition: Definition) -> list[Definition]:
        out = []
        for base in definition.node.bases:
            name = _dotted(base)
            if name is None:
                continue
            head, _, rest = name.partition(".")
            found = self.lookup(definition.module, head)
            if found is not None and rest and found.kind == "module":
                found = self.lookup(found.module, rest)
            if found is not None and found.kind == "class":
                out.append(found)
        return out

    def _fields(self, definition: Definition, depth: int) -> set[str] | None:
        """Dataclass fields of a class and its (dataclass) bases; None when a base cannot be read."""
        fields = {
            n.target.id
            for n in definition.node.body
            if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name) and "ClassVar" not in ast.unparse(n)
        }
        for base in self.bases(definition):
            if _is_dataclass(base.node) or _method(base.node, "__init__") is None:
                more = self._fields(base, depth + 1) if depth < 12 else set()
                fields |= more or set()
        return fields

    def member(self, definition: Definition, name: str, depth: int = 0) -> Definition | None:
        """A method or attribute of a class, along its bases."""
        if not isinstance(definition.node, ast.ClassDef) or depth > 12:
            return None
        method = _method(definition.node, name)
        if method is not None:
            return Definition(definition.module, method, "function")
        for base in self.bases(definition):
            found = self.member(base, name, depth + 1)
            if found is not None:
                return found
        return None

    def instance_class(self, definition: Definition) -> Definition | None:
        """The class of a module-level instance (`ModelRegistry = _ModelRegistry(...)`), or of one declared with a
        bare annotation and made lazily (vllm.platforms: `current_platform: Platform`, built by __getattr__)."""
        node = definition.node
        if isinstance(node, ast.AnnAssign) and node.value is None:
            name = _dotted(node.annotation)
            found = self.lookup(definition.module, name) if name and "." not in name else None
            return found if found is not None and found.kind == "class" else None
        if isinstance(node, ast.Assign | ast.AnnAssign) and isinstance(node.value, ast.Call):
            name = _dotted(node.value.func)
            found = self.lookup(definition.module, name) if name and "." not in name else None
            if found is not None and found.kind == "class":
                return found
        return None

    def returned_classes(self, definition: Definition) -> list[Definition]:
        """The classes a factory function returns by name (`return FusedMoE`)."""
        if not isinstance(definition.node, ast.FunctionDef):
            return []
        out: dict[str, Definition] = {}
        for node in ast.walk(definition.node):
            if isinstance(node, ast.Return) and isinstance(node.value, ast.Name):
                found = self.lookup(definition.module, node.value.id)
                if found is not None and found.kind == "class":
                    out.setdefault(f"{found.module}.{found.node.name}", found)
        return list(out.values())


def _top_level(body: list[ast.stmt]):
    """Statements at module level, including those inside if/try blocks (TYPE_CHECKING, optional imports)."""
    for node in body:
        yield node
        if isinstance(node, ast.If):
            yield from _top_level(node.body)
            yield from _top_level(node.orelse)
        elif isinstance(node, ast.Try):
            yield from _top_level(node.body)
            for handler in node.handlers:
                yield from _top_level(handler.body)
            yield from _top_level(node.orelse)


def _method(cls: ast.ClassDef, name: str):
    return next((n for n in cls.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.name == name), None)


def _is_dataclass(cls: ast.ClassDef) -> bool:
    return any("dataclass" in ast.unparse(d) for d in cls.decorator_list)


def _dotted(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        head = _dotted(node.value)
        return f"{head}.{node.attr}" if head else None
    if isinstance(node, ast.Subscript):
        return _dotted(node.value)
    return None


def _signature(args: ast.arguments, skip_self: bool) -> Signature:
    positional = [a.arg for a in args.posonlyargs + args.args]
    if skip_self and positional:
        positional = positional[1:]
    names = {a.arg for a in args.args + args.kwonlyargs} - ({"self", "cls"} if skip_self else set())
    return Signature(frozenset(names), None if args.vararg else len(positional), args.kwarg is not None)


@dataclass
class Problem:
    file: str
    line: int
    message: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.message}"


class FileCheck:
    """One generated file against a SourceTree."""

    def __init__(self, path: Path, tree: SourceTree, shown: str | None = None) -> None:
        self.path, self.tree, self.shown = path, tree, shown or str(path)
        self.problems: list[Problem] = []
        self.calls_checked = 0
        self.symbols_checked = 0

    @cached_property
    def module(self) -> ast.Module:
        return ast.parse(self.path.read_text())

    def run(self) -> list[Problem]:
        imported = self._imports()
        for node in ast.walk(self.module):
            if isinstance(node, ast.Call):
                self._call(node, imported)
        return self.problems

    def _imports(self) -> dict[str, Definition]:
        names: dict[str, Definition] = {}
        for node in ast.walk(self.module):
            if isinstance(node, ast.ImportFrom) and not node.level and (node.module or "").split(".")[0] in FRAMEWORKS:
                if self.tree.path(node.module) is None:
                    self._problem(node, f"module {node.module} does not exist in the pinned release")
                    continue
                for alias in node.names:
                    self.symbols_checked += 1
                    found = self.tree.lookup(node.module, alias.name)
                    if found is None:
                        self._problem(node, f"{node.module} has no {alias.name} in the pinned release")
                    else:
                        names[alias.asname or alias.name] = found
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.split(".")[0] in FRAMEWORKS:
                        self.symbols_checked += 1
                        if self.tree.path(alias.name) is None:
                            self._problem(node, f"module {alias.name} does not exist in the pinned release")
        return names

    def _call(self, node: ast.Call, imported: dict[str, Definition]) -> None:
        targets = self._callee(node.func, imported)
        for definition, label in targets:
            sig = self.tree.signature(definition)
            if sig is None:
                continue
            self.calls_checked += 1
            for kw in node.keywords:
                if kw.arg is not None and kw.arg not in sig.names and not sig.any_keyword:
                    self._problem(node, f"{label}() has no parameter {kw.arg!r} in the pinned release")
            given = sum(not isinstance(a, ast.Starred) for a in node.args)
            if sig.positional is not None and given > sig.positional:
                self._problem(node, f"{label}() takes {sig.positional} positional arguments, {given} given")

    def _callee(self, func: ast.AST, imported: dict[str, Definition]) -> list[tuple[Definition, str]]:
        if isinstance(func, ast.Name) and func.id in imported:
            return [(imported[func.id], func.id)]
        if isinstance(func, ast.Attribute):
            owner = _dotted(func.value)
            if owner in imported:
                definition = imported[owner]
                if definition.kind == "value":
                    definition = self.tree.instance_class(definition) or definition
                found = (
                    self.tree.lookup(definition.module, func.attr)
                    if definition.kind == "module"
                    else self.tree.member(definition, func.attr)
                )
                if found is None:
                    self._problem(func, f"{owner}.{func.attr} does not exist in the pinned release")
                    return []
                return [(found, f"{owner}.{func.attr}")]
        if isinstance(func, ast.Call) and isinstance(func.func, ast.Name) and func.func.id in imported:
            factory = imported[func.func.id]
            return [(cls, f"{func.func.id}(...) -> {cls.node.name}") for cls in self.tree.returned_classes(factory)]
        return []

    def _problem(self, node: ast.AST, message: str) -> None:
        self.problems.append(Problem(self.shown, getattr(node, "lineno", 0), message))
