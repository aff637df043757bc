"""dayone's layers read top to bottom, proved on the source by static analysis: every import of every module (at
module level, inside functions, relative, and importlib.import_module on a "dayone..." name) goes to its own layer
or one below. The layers, bottom to top (docs/architecture.md):

    core < spec < kernels < adapters < pipeline domain < commands < cli

A violation fails with the importing file, its line and the layer it reached into. The checker is itself tested on
a synthetic tree with one planted violation of each kind, so a checker that sees nothing cannot pass."""

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
    # The framework pin table: the generators stamp its versions into the code they write, so it sits with the
    # adapters though its folder is pipeline/checks/ (which also fetches those releases). It imports only core, and
    # this classification keeps it so.
    "dayone.checks.releases": "adapters",
    "dayone.commands": "commands",
    "dayone.cli": "cli",
    "dayone.__main__": "cli",
}
DOMAIN = "domain"  # every other dayone.* module: checkpoint, synth, validate, run, dashboard, present, ...

# Programs the tests and `generate --check` run as `python -m` in the Megatron peer: each composes a synthetic
# checkpoint (dayone.synth) with the Megatron adapters, so, like the CLI, it is an entry point in the top layer:
# they may import each other, nothing below may import them, and each must run as a program (the test checks).
PROGRAMS = frozenset(
    {
        "dayone.adapters.megatron.bridge_round_trip",
        "dayone.adapters.megatron.check_bridge",
        "dayone.adapters.megatron.check_miles",
        "dayone.adapters.megatron.miles_trainer",
        "dayone.adapters.megatron.train_step",
        "dayone.adapters.megatron.verify",
    }
)


@dataclass(frozen=True)
class Import:
    importer: str
    target: str
    file: Path
    line: int


def layer_of(module: str, programs: frozenset[str] = PROGRAMS) -> str:
    if module in programs:
        return "cli"
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
    """Every dayone module `module` imports, wherever in the file the import statement is."""
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
    target: str  # the module imported (for a program that cannot run: the program itself)
    message: str

    def __str__(self) -> str:
        try:
            where = self.file.relative_to(ROOT)
        except ValueError:
            where = self.file
        return f"{where}:{self.line}: {self.message}"


def violations(package_dirs: dict[str, Path], programs=PROGRAMS) -> list[Violation]:
    modules = modules_under(package_dirs)
    known = set(modules)
    problems = []
    for module, path in modules.items():
        for imp in dict.fromkeys(imports_of(module, path, known)):  # `from m import a, b`: one edge
            src, dst = layer_of(module, programs), layer_of(imp.target, programs)
            if LAYERS.index(dst) > LAYERS.index(src):
                message = f"{src} module {module} imports {dst} module {imp.target}"
                problems.append(Violation(path, imp.line, imp.target, message))
    for program in sorted(programs & known):
        if "__main__" not in modules[program].read_text():
            message = f"{program} is listed as a program but never runs as one (no __main__ guard)"
            problems.append(Violation(modules[program], 1, program, message))
    return problems


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
    assert {"dayone.adapters.weightmap", "dayone.templates", "dayone.checks.releases"} <= by_layer["adapters"]
    assert {"dayone.present", "dayone.checkpoint.spec_source", "dayone.run.stages"} <= by_layer["domain"]
    assert "dayone.commands.run_cmd" in by_layer["commands"] and "dayone.cli" in by_layer["cli"]
    assert PROGRAMS <= set(modules), "a listed program was moved or renamed: update PROGRAMS"


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
    "adapters/tool.py": "from dayone.synth import draw\nif __name__ == '__main__':\n    pass\n",  # a program
    "pipeline/__init__.py": "",
    "pipeline/synth/__init__.py": "",
    "pipeline/synth/draw.py": "from dayone.adapters import model\n",
    "pipeline/run/__init__.py": "",
    "pipeline/run/stages.py": "from dayone import present\n",
    "pipeline/present.py": "",
    "pipeline/convert.py": "from dayone.commands.output import console\n",  # domain -> command module
    "pipeline/uses_tool.py": "import dayone.adapters.tool\n",  # imports a program
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
    ("pipeline/convert.py", "dayone.commands.output"),
    ("pipeline/uses_tool.py", "dayone.adapters.tool"),
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
    problems = violations(planted, programs=frozenset({"dayone.adapters.tool"}))
    assert found(problems, tmp_path) == EXPECTED, "\n".join(map(str, problems))
    lines = {(str(p.file.relative_to(tmp_path)), p.line) for p in problems}
    assert ("core/late.py", 2) in lines and ("kernels/op/launch.py", 1) in lines


def test_checker_flags_a_program_that_cannot_run(planted, tmp_path):
    (planted["dayone.adapters"] / "tool.py").write_text("from dayone.synth import draw\n")
    problems = violations(planted, programs=frozenset({"dayone.adapters.tool"}))
    assert ("adapters/tool.py", "dayone.adapters.tool") in found(problems, tmp_path)
    # Not a program: its import of the domain climbs a layer.
    problems = violations(planted, programs=frozenset())
    assert ("adapters/tool.py", "dayone.synth.draw") in found(problems, tmp_path)
