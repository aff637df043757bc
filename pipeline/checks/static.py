"""`integrate generate --check`: everything a CPU machine can verify of generated code it cannot run.

Per target: every Python file byte-compiles; ruff check and ruff format --check are clean; every symbol imported from
the framework exists in the pinned release and every keyword passed to it is in its signature (api.py); the weight
table the code walks passes the table checks (coverage, shapes, splits, part order, derived tensors); and
regenerating gives the same bytes. Miles and Megatron-Bridge: where the megatron peer is installed, the model those
adapters build, run by megatron-core on the CPU, and the generated package used as the framework uses it
(`dayone.adapters.megatron.peer`; "not run" and why where the peer is not installed).
"""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from dayone.adapters.pins import RELEASES, TARGET_RELEASES
from dayone.adapters.targets.common import LINE_LENGTH
from dayone.adapters.weightmap.check import check_table
from dayone.adapters.weightmap.layouts import VLLM_ROUTED_EXPERTS
from dayone.checks.api import FileCheck, SourceTree
from dayone.checks.protocols import REGISTRY_PROTOCOLS, check_protocols, check_quantized_names
from dayone.checks.releases import sources
from dayone.checks.sglang_protocol import check_sglang_model
from dayone.conform.results import TargetReport
from dayone.present import step
from dayone.spec.schema import ModelSpec

RUFF_RULES = "E,F,W,I,B,UP"
# Line length belongs to the formatter (ruff format at LINE_LENGTH, pinned). What it cannot wrap are the lines that
# hold the spec's name (up to 64 characters): the provenance header, which `package` reads back as one line, and
# docstrings; a hand-writer would not split those either.
RUFF_IGNORED = "E501"


@dataclass
class TargetCheck:
    target: str
    files: int = 0
    symbols: int = 0
    calls: int = 0
    releases: list[str] = field(default_factory=list)
    problems: dict[str, list[str]] = field(default_factory=dict)
    megatron: dict | None = None  # the Megatron checks' report (Miles, Megatron-Bridge)
    conform: TargetReport | None = None  # the engine's own judgement (dayone.conform), where `generate --check` ran it

    @property
    def ok(self) -> bool:
        return not any(self.problems.values())

    def as_dict(self) -> dict:
        return {
            "target": self.target,
            "ok": self.ok,
            "files": self.files,
            "symbols_checked": self.symbols,
            "calls_checked": self.calls,
            "releases": self.releases,
            "problems": self.problems,
            **({"megatron": self.megatron} if self.megatron is not None else {}),
            **({"conform": self.conform.as_dict()} if self.conform is not None else {}),
        }


def check_target(
    spec: ModelSpec, target: str, root: Path, expected: dict[str, str], regenerate: Callable[[], dict[str, str]]
) -> TargetCheck:
    """root: the folder the target was generated into; expected: the files as generated."""
    result = TargetCheck(target)
    py_files = sorted(root / rel for rel in expected if rel.endswith(".py"))
    result.files = len(expected)
    # A check takes seconds to minutes (the Megatron checks most): off a terminal, a line as each part starts
    step(f"generate: {target}: checking {len(expected)} files (byte-compile, ruff, the pinned releases' API)")
    result.problems["byte_compile"] = _byte_compile(py_files, root)
    result.problems["ruff"] = _ruff(root, py_files)
    tree = SourceTree([sources(RELEASES[name]) for name in TARGET_RELEASES[target]])
    result.releases = [RELEASES[name].key for name in TARGET_RELEASES[target]]
    api: list[str] = []
    for path in py_files:
        check = FileCheck(path, tree, str(path.relative_to(root)))
        api.extend(str(p) for p in check.run())
        result.symbols += check.symbols_checked
        result.calls += check.calls_checked
    result.problems["api"] = api
    result.problems["table"] = _table(spec, root, expected) + _model_names(root, expected)
    result.problems["protocols"] = _protocols(spec, target, root, expected, tree)
    if target in ("miles", "megatron-bridge"):
        from dayone.programs.megatron import verdicts
        from dayone.programs.megatron.checks import MODEL_CHECK
        from dayone.programs.megatron.runner import adapter_checks, megatron_checks, reused

        step(f"generate: {target}: the Megatron model and adapter checks in megatron-core")
        result.megatron = {"model": megatron_checks(spec), "adapter": adapter_checks(spec, target)}
        kept = reused(spec, (MODEL_CHECK, target))
        if kept:
            step(f"generate: {target}: {' and '.join(kept)} passed before on the same spec, code and releases, "
                 f"not run again (kept in {verdicts.folder()})")  # fmt: skip
        result.problems["megatron"] = [f for r in result.megatron.values() for f in r.get("failures", [])]
    again = regenerate()
    result.problems["deterministic"] = [
        f"{rel}: differs when regenerated" for rel in expected if again.get(rel) != expected[rel]
    ]
    return result


def _byte_compile(paths: list[Path], root: Path) -> list[str]:
    problems = []
    for path in paths:
        try:
            compile(path.read_text(), str(path), "exec")
        except SyntaxError as err:
            problems.append(f"{path.relative_to(root)}:{err.lineno}: {err.msg}")
    return problems


def _ruff(root: Path, paths: list[Path]) -> list[str]:
    base = [sys.executable, "-m", "ruff"]
    names = [str(p.relative_to(root)) for p in paths]
    common = ["--isolated", "--no-cache", f"--line-length={LINE_LENGTH}"]
    problems = []
    lint = subprocess.run([*base, "check", *common, f"--select={RUFF_RULES}", f"--ignore={RUFF_IGNORED}",
                           "--output-format=concise", *names],
                          cwd=root, capture_output=True, text=True, check=False)  # fmt: skip
    if lint.returncode != 0:
        problems += [line for line in lint.stdout.splitlines() if ":" in line and not line.startswith("Found")]
    fmt = subprocess.run([*base, "format", *common, "--check", *names], cwd=root, capture_output=True, text=True,
                         check=False)  # fmt: skip
    if fmt.returncode != 0:
        problems += [line for line in fmt.stdout.splitlines() if line.startswith("Would reformat")]
    return problems


def _table(spec: ModelSpec, root: Path, expected: dict[str, str]) -> list[str]:
    """Import the generated weight_table (our own generated data and walk.py; the package's __init__, which may import
    the framework, is not run) and check it."""
    problems = []
    for rel in (rel for rel in expected if rel.endswith("/weight_table.py")):
        table = load_generated(root, rel.removesuffix(".py").replace("/", "."))
        problems += [f"{rel}: {p}" for p in check_table(table, spec)]
    return problems


def _protocols(spec: ModelSpec, target: str, root: Path, expected: dict[str, str], tree: SourceTree) -> list[str]:
    """The model class has every method its framework's registry asks for; the expert parameters the table fills
    are those the quantization method in use registers (protocols.py)."""
    problems: list[str] = []
    quant = spec.quantization.format if spec.quantization is not None else None
    for rel in engine_models(expected):
        if target in REGISTRY_PROTOCOLS:
            arch = spec.hf.architecture
            problems += [str(p) for p in check_protocols(root / rel, rel, tree, target, arch)]
        if target == "sglang":  # no Protocol class in SGLang: its registry's and runner's call sites say what it asks
            problems += [str(p) for p in check_sglang_model(root / rel, rel, tree, spec.hf.architecture)]
        table_rel = rel.removesuffix("model.py") + "weight_table.py"
        if table_rel in expected:
            table = load_generated(root, table_rel.removesuffix(".py").replace("/", "."))
            problems += check_quantized_names(table, tree, target, quant, table_rel)
    return problems


def engine_models(expected: dict[str, str]) -> list[str]:
    """The generated model.py of a package (`<package>/model.py`), not a module of that name deeper down (the Miles
    and Megatron-Bridge packages carry dayone's Megatron model builder as _dayone/adapters/megatron/model.py)."""
    return [rel for rel in expected if rel.endswith("/model.py") and rel.count("/") == 1]


def _model_names(root: Path, expected: dict[str, str]) -> list[str]:
    """Every module on the path of a table parameter is an attribute the generated model.py assigns (the leaf is the
    framework layer's own `weight` / FusedMoE's `w13_weight...`), so the table and the model name the same tree."""
    problems = []
    for rel in engine_models(expected):
        tree = ast.parse((root / rel).read_text())
        assigned = {"layers", VLLM_ROUTED_EXPERTS}  # vLLM's MoE runner builds `routed_experts` itself
        for node in ast.walk(tree):
            targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
            for target in targets:
                if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name):
                    assigned.add(target.attr)
                if isinstance(target, ast.Tuple):
                    assigned |= {t.attr for t in target.elts if isinstance(t, ast.Attribute)}
        table = load_generated(root, rel.removesuffix("model.py").replace("/", ".") + "weight_table")
        for param in table.PARAMS:
            if param.name.startswith(("vision_tower.", "mm_projector.")):
                continue  # passed through, not part of the text model
            path = [part for part in param.name.split(".")[:-1] if part != "{i}"]
            missing = [part for part in path if part not in assigned]
            if missing:
                problems.append(f"{rel}: builds no module {missing[0]!r} for parameter {param.name}")
    return problems


def load_generated(root: Path, module: str):
    """Import `package.module` from a generated folder without running the package's __init__."""
    package = module.split(".")[0]
    for name in [m for m in sys.modules if m == package or m.startswith(package + ".")]:
        del sys.modules[name]
    shell = types.ModuleType(package)
    shell.__path__ = [str(root / package)]
    sys.modules[package] = shell
    return importlib.import_module(module)
