"""dayone's layers read top to bottom, proved on the source by static analysis: every import of every module (at
module level, inside functions, relative, importlib.import_module on a "dayone..." name or f-string) and every
module it names in a string (a `python -m dayone...` command line, a table of module names handed to import_module
or to a subprocess) goes to its own layer or one below, and no modules import each other round in a cycle. The
layers, bottom to top (docs/architecture.md):

    core < spec < kernels < adapters < pipeline domain < commands < cli

A violation fails with the importing file, its line and the layer it reached into (or the cycle). The checker is
itself tested on a synthetic tree with one planted violation of each kind, so a checker that sees nothing cannot
pass."""

from __future__ import annotations

import ast
import textwrap
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# Bottom to top; a module name belongs to the layer of its longest matching prefix. "dayone" itself (the package's
# __init__: the version, looked up lazily) imports nothing and sits at the bottom with core.
LAYERS = ("core", "spec", "kernels", "adapters", "domain", "commands", "cli")
PREFIXES = {
    "dayone": "core",
    "dayone.core": "core",
    "dayone.spec": "spec",
    "dayone.kernels": "kernels",
    "dayone.adapters": "adapters",
    "dayone.templates": "adapters",  # the templates the adapters' generators render (data; no imports)
    "dayone.commands": "commands",
    "dayone.cli": "cli",
    "dayone.__main__": "cli",
}
DOMAIN = "domain"  # every other dayone.* module: checkpoint, synth, validate, run, dashboard, present, ...


@dataclass(frozen=True)
class Import:
    importer: str
    target: str
    file: Path
    line: int


def layer_of(module: str) -> str:
    parts = module.split(".")
    for n in range(len(parts), 0, -1):
        found = PREFIXES.get(".".join(parts[:n]))
        if found and (n > 1 or module == "dayone"):
            return found
    return DOMAIN


def modules_under(package_dirs: dict[str, Path]) -> dict[str, Path]:
    """{module name: file} for every .py file below each (import name -> folder) root."""
    found = {}
    for name, folder in package_dirs.items():
        for path in sorted(folder.rglob("*.py")):
            if "__pycache__" in path.parts:
                continue
            parts = list(path.relative_to(folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join([name, *parts])] = path
    return found


def installed_layout() -> dict[str, Path]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    return {name: ROOT / folder for name, folder in config["package-dir"].items()}


def imports_of(module: str, path: Path, known: set[str]) -> list[Import]:
    """Every dayone module `module` imports, wherever in the file the import statement is, and every one it names:
    a string that is a module's whole name, or an f-string that begins with "dayone." (a module of the package its
    constant part names). A module run by name (`python -m`, or import_module of a variable) is named somewhere as a
    string: the file that names it reaches it."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                origin = ".".join(base + ([node.module] if node.module else []))
            else:
                origin = node.module or ""
            # `from dayone import present` imports the module dayone.present, not the package dayone.
            targets = [f"{origin}.{a.name}" if f"{origin}.{a.name}" in known else origin for a in node.names]
        elif isinstance(node, ast.Call) and _is_import_module(node.func) and node.args:
            targets = [_module_name(node.args[0])]
        elif isinstance(node, (ast.Constant, ast.JoinedStr)):
            named = _module_name(node)
            targets = [named] if named in known and named != module else []
        found += [Import(module, t, path, node.lineno) for t in targets if t == "dayone" or t.startswith("dayone.")]
    return found


def _is_import_module(func: ast.expr) -> bool:
    return (isinstance(func, ast.Attribute) and func.attr == "import_module") or (
        isinstance(func, ast.Name) and func.id in ("import_module", "__import__")
    )


def _module_name(arg: ast.expr) -> str:
    """The module a name expression imports: a constant, or the package of an f-string's constant prefix
    (f"dayone.kernels.{name}" imports a module of dayone.kernels)."""
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return arg.value
    if isinstance(arg, ast.JoinedStr) and arg.values and isinstance(arg.values[0], ast.Constant):
        return str(arg.values[0].value).rpartition(".")[0]
    return ""


@dataclass(frozen=True)
class Violation:
    file: Path
    line: int
    target: str  # the module imported (for a cycle: the next module round it)
    message: str

    def __str__(self) -> str:
        try:
            where = self.file.relative_to(ROOT)
        except ValueError:
            where = self.file
        return f"{where}:{self.line}: {self.message}"


def violations(package_dirs: dict[str, Path]) -> list[Violation]:
    modules = modules_under(package_dirs)
    known = set(modules)
    problems = []
    for module, path in modules.items():
        for imp in dict.fromkeys(imports_of(module, path, known)):  # `from m import a, b`: one edge
            src, dst = layer_of(module), layer_of(imp.target)
            if LAYERS.index(dst) > LAYERS.index(src):
                message = f"{src} module {module} imports {dst} module {imp.target}"
                problems.append(Violation(path, imp.line, imp.target, message))
    return problems


def cycles(package_dirs: dict[str, Path]) -> list[Violation]:
    """Modules that import each other round (at module level, in a function or by name): one Violation per cycle,
    at the first module's import of the next. Within a layer as across them, the rooms import one way."""
    modules = modules_under(package_dirs)
    known = set(modules)
    edges: dict[str, dict[str, Import]] = {module: {} for module in modules}
    for module, path in modules.items():
        for imp in imports_of(module, path, known):
            target = imp.target
            while target not in known and "." in target:  # `from dayone.x import name`: the module dayone.x
                target = target.rpartition(".")[0]
            if target in known and target != module:
                edges[module].setdefault(target, imp)
    problems = []
    for component in _strongly_connected(edges):
        ring = _ring(component, edges)
        first = edges[ring[0]][ring[1]]
        message = "import cycle: " + " -> ".join([*ring, ring[0]])
        problems.append(Violation(first.file, first.line, ring[1], message))
    return problems


def _strongly_connected(edges: dict[str, dict[str, Import]]) -> list[list[str]]:
    """The components of more than one module (Tarjan's algorithm, iterative: the graph has hundreds of modules)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, targets = work[-1]
            step = next(targets, None)
            if step is not None:
                if step not in index:
                    index[step] = low[step] = len(index)
                    stack.append(step)
                    on_stack.add(step)
                    work.append((step, iter(sorted(edges[step]))))
                elif step in on_stack:
                    low[node] = min(low[node], index[step])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def _ring(component: list[str], edges: dict[str, dict[str, Import]]) -> list[str]:
    """One cycle through the component's first module, found by a breadth-first search back to it."""
    start, members = component[0], set(component)
    came_from = {start: ""}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for target in sorted(edges[node]):
                if target == start:
                    ring = [node]
                    while came_from[ring[-1]]:
                        ring.append(came_from[ring[-1]])
                    return ring[::-1]
                if target in members and target not in came_from:
                    came_from[target] = node
                    following.append(target)
        frontier = following
    return component


def test_no_modules_import_each_other_round():
    problems = cycles(installed_layout())
    assert not problems, "import cycles:\n" + "\n".join(map(str, problems))


def test_every_import_goes_down_the_layers():
    layout = installed_layout()
    modules = modules_under(layout)
    assert len(modules) > 150, f"found only {len(modules)} modules: is the layout read from pyproject.toml?"
    problems = violations(layout)
    assert not problems, "imports that climb a layer:\n" + "\n".join(map(str, problems))


def test_each_layer_is_where_the_picture_puts_it():
    """The folders land in the layers docs/architecture.md names (a renamed folder must not drop out silently)."""
    modules = modules_under(installed_layout())
    by_layer = {layer: {m for m in modules if layer_of(m) == layer} for layer in LAYERS}
    assert by_layer["core"] == {"dayone", *(m for m in modules if m.startswith("dayone.core"))}
    assert "dayone.spec.schema" in by_layer["spec"] and "dayone.kernels.kda" in by_layer["kernels"]
    assert {"dayone.adapters.weightmap", "dayone.templates", "dayone.adapters.pins"} <= by_layer["adapters"]
    assert {"dayone.present", "dayone.checkpoint.spec_source", "dayone.run.stages"} <= by_layer["domain"]
    assert "dayone.commands.run_cmd" in by_layer["commands"] and "dayone.cli" in by_layer["cli"]
    assert "dayone.programs.megatron.verify" in by_layer["domain"]  # a program run in a peer: it composes synth


# One planted violation of each kind the checker must see, in a synthetic tree laid out like the real one.
PLANTED = {
    "core/clean.py": "import json\nfrom dayone.core import other\n",
    "core/other.py": "",
    "core/late.py": "def f():\n    from dayone.spec import schema\n",  # function-level import
    "core/shows.py": "from dayone import present\n",  # the module dayone.present, not the package dayone
    "spec/schema.py": "from dayone.core import clean\n",
    "spec/upward.py": "import dayone.kernels.op\n",
    "kernels/op/__init__.py": "from dayone.spec import schema\nfrom . import launch\n",
    "kernels/op/launch.py": "from ...adapters import model\n",  # relative import, two levels up
    "adapters/model.py": "from dayone.kernels.op import launch\n",
    "adapters/targets.py": "import importlib\nimportlib.import_module(f'dayone.run.{name}')\n",  # dynamic
    # Modules reached by name: a `python -m` command line, a table handed to import_module, an f-string `-m`.
    "adapters/runs.py": "import subprocess, sys\nsubprocess.run([sys.executable, '-m', 'dayone.synth.draw'])\n",
    "adapters/table.py": "import importlib\nCHECKS = {'x': 'dayone.run.stages'}\n"
    "def load(k):\n    return importlib.import_module(CHECKS[k])\n",
    "adapters/fmt.py": "import sys\nCMD = [sys.executable, '-m', f'dayone.run.{NAME}']\n",
    # A cycle inside a domain: one import at module level, the other inside a function.
    "pipeline/synth/loop_a.py": "from dayone.synth import loop_b\n",
    "pipeline/synth/loop_b.py": "def f():\n    from dayone.synth.loop_a import x\n",
    "pipeline/__init__.py": "",
    "pipeline/synth/__init__.py": "",
    "pipeline/synth/draw.py": "from dayone.adapters import model\n",
    "pipeline/run/__init__.py": "",
    "pipeline/run/stages.py": "from dayone import present\n",
    "pipeline/present.py": "",
    "pipeline/convert.py": "from dayone.commands.output import console\n",  # domain -> command module
    "pipeline/commands/__init__.py": "",
    "pipeline/commands/output.py": "from dayone.cli import main\n",
    "pipeline/cli.py": "from dayone.commands import output\n",
}
EXPECTED = {
    ("core/late.py", "dayone.spec.schema"),
    ("core/shows.py", "dayone.present"),
    ("spec/upward.py", "dayone.kernels.op"),
    ("kernels/op/launch.py", "dayone.adapters.model"),
    ("adapters/targets.py", "dayone.run"),
    ("adapters/runs.py", "dayone.synth.draw"),
    ("adapters/table.py", "dayone.run.stages"),
    ("adapters/fmt.py", "dayone.run"),
    ("pipeline/convert.py", "dayone.commands.output"),
    ("pipeline/commands/output.py", "dayone.cli"),
}


@pytest.fixture
def planted(tmp_path: Path) -> dict[str, Path]:
    for rel, text in PLANTED.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(textwrap.dedent(text))
    for folder in ("core", "spec", "kernels", "adapters"):
        (tmp_path / folder / "__init__.py").touch()
    return {
        "dayone": tmp_path / "pipeline",
        "dayone.core": tmp_path / "core",
        "dayone.spec": tmp_path / "spec",
        "dayone.kernels": tmp_path / "kernels",
        "dayone.adapters": tmp_path / "adapters",
    }


def found(problems: list[Violation], root: Path) -> set[tuple[str, str]]:
    return {(str(p.file.relative_to(root)), p.target) for p in problems}


def test_checker_finds_each_planted_violation_and_nothing_else(planted, tmp_path):
    problems = violations(planted)
    assert found(problems, tmp_path) == EXPECTED, "\n".join(map(str, problems))
    lines = {(str(p.file.relative_to(tmp_path)), p.line) for p in problems}
    assert ("core/late.py", 2) in lines and ("kernels/op/launch.py", 1) in lines


def test_checker_finds_each_planted_cycle_and_nothing_else(planted, tmp_path):
    """The cycle inside a domain, and the two that planted upward imports close (each also a layer violation)."""
    problems = cycles(planted)
    assert {(str(p.file.relative_to(tmp_path)), p.message) for p in problems} == {
        ("pipeline/synth/loop_a.py", "import cycle: dayone.synth.loop_a -> dayone.synth.loop_b -> dayone.synth.loop_a"),
        (
            "adapters/model.py",
            "import cycle: dayone.adapters.model -> dayone.kernels.op.launch -> dayone.adapters.model",
        ),
        ("pipeline/cli.py", "import cycle: dayone.cli -> dayone.commands.output -> dayone.cli"),
    }
