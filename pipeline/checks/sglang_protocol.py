"""What SGLang asks of a generated model module, read from the pinned release's own source (so nothing here drifts
from the release it judges):
- its model registry (sglang.srt.models.registry) takes a module's classes from the attribute it probes with
  `hasattr(module, "EntryClass")`: the module assigns it, naming config.json's architecture class;
- its loader (sglang.srt.model_loader.loader._initialize_model) builds the class with the keywords of the `kwargs`
  dict it fills (config, quant_config) and calls `model.load_weights(weights)`;
- its model runner (sglang.srt.model_executor.runner.eager_runner) calls `model.forward(input_ids, positions,
  forward_batch, **kwargs)`: forward takes that many positional arguments.
SGLang declares no Protocol class for models (unlike vLLM's interfaces_base), hence this reading of its call sites.
"""

from __future__ import annotations

import ast
from pathlib import Path

from dayone.checks.api import Problem, SourceTree

REGISTRY = "sglang.srt.models.registry"
LOADER = "sglang.srt.model_loader.loader"
RUNNER = "sglang.srt.model_executor.runner.eager_runner"


def check_sglang_model(path: Path, shown: str, tree: SourceTree, arch: str) -> list[Problem]:
    """Problems of the generated model module at `path` (shown as `shown`) against the release in `tree`."""
    wants = release_wants(tree)
    module = ast.parse(path.read_text())
    problems = [Problem(shown, 0, f"cannot read {what} from the pinned sglang source") for what in wants.missing]
    entry = wants.entry_attribute
    if entry and arch not in _entry_names(module, entry):
        problems.append(Problem(shown, 0, f"assigns no {entry} naming {arch} (sglang's model registry reads it)"))
    local = {n.name: n for n in module.body if isinstance(n, ast.ClassDef)}
    cls = local.get(arch)
    if cls is None:
        return [*problems, Problem(shown, 0, f"defines no class {arch} (config.json's architecture)")]
    methods = _methods(cls, local)
    init = methods.get("__init__")
    if init is not None and wants.init_keywords:
        missing = sorted(k for k in wants.init_keywords if not _takes_keyword(init, k))
        if missing:
            problems.append(
                Problem(
                    shown, init.lineno, f"{arch}.__init__ takes no {', '.join(missing)} (sglang's loader passes it)"
                )
            )
    for name, count, caller in (
        ("load_weights", wants.load_weights_args, LOADER),
        ("forward", wants.forward_args, RUNNER),
    ):
        if count is None:
            continue
        method = methods.get(name)
        if method is None:
            problems.append(Problem(shown, cls.lineno, f"{arch} lacks {name}(), which {caller} calls"))
        elif not _takes_positional(method, count):
            problems.append(
                Problem(
                    shown, method.lineno, f"{arch}.{name} cannot take the {count} positional arguments {caller} passes"
                )
            )
    return problems


class ReleaseWants:
    def __init__(self) -> None:
        self.entry_attribute: str | None = None
        self.init_keywords: set[str] = set()
        self.load_weights_args: int | None = None
        self.forward_args: int | None = None
        self.missing: list[str] = []


def release_wants(tree: SourceTree) -> ReleaseWants:
    wants = ReleaseWants()
    registry, loader, runner = tree.parse(REGISTRY), tree.parse(LOADER), tree.parse(RUNNER)
    for node in ast.walk(registry) if registry else ():
        probed = node.args[1] if _is_call(node, "hasattr") and len(node.args) == 2 else None
        if isinstance(probed, ast.Constant) and isinstance(probed.value, str) and probed.value.endswith("Class"):
            wants.entry_attribute = probed.value
    initialize = _function(loader, "_initialize_model")
    for node in ast.walk(initialize) if initialize else ():
        named = isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "kwargs" for t in node.targets)
        if named and isinstance(node.value, ast.Dict):
            wants.init_keywords = {k.value for k in node.value.keys if isinstance(k, ast.Constant)}
    wants.load_weights_args = _positional_at_calls(loader, "model", "load_weights")
    wants.forward_args = _positional_at_calls(runner, "model", "forward")
    for what, value in (
        (f"{REGISTRY}: the entry attribute", wants.entry_attribute),
        (f"{LOADER}._initialize_model: the constructor keywords", wants.init_keywords),
        (f"{LOADER}: the load_weights call", wants.load_weights_args),
        (f"{RUNNER}: the forward call", wants.forward_args),
    ):
        if not value:
            wants.missing.append(what)
    return wants


def _is_call(node: ast.AST, name: str) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == name


def _function(module: ast.Module | None, name: str) -> ast.FunctionDef | None:
    for node in module.body if module else ():
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return node
    return None


def _positional_at_calls(module: ast.Module | None, owner: str, method: str) -> int | None:
    """The most positional arguments passed at calls `<...>.<owner>.<method>(...)` or `<owner>.<method>(...)`."""
    counts = []
    for node in ast.walk(module) if module else ():
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == method:
            value = node.func.value
            if (isinstance(value, ast.Name) and value.id == owner) or (
                isinstance(value, ast.Attribute) and value.attr == owner
            ):
                counts.append(sum(1 for a in node.args if not isinstance(a, ast.Starred)))
    return max(counts) if counts else None


def _entry_names(module: ast.Module, attribute: str) -> set[str]:
    names: set[str] = set()
    for node in module.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == attribute for t in node.targets):
            values = node.value.elts if isinstance(node.value, ast.List | ast.Tuple) else [node.value]
            names |= {v.id for v in values if isinstance(v, ast.Name)}
    return names


def _methods(cls: ast.ClassDef, local: dict[str, ast.ClassDef], depth: int = 0) -> dict[str, ast.FunctionDef]:
    """The class's methods, its locally defined bases' included (the class's own win)."""
    out: dict[str, ast.FunctionDef] = {}
    for base in reversed(cls.bases):
        if isinstance(base, ast.Name) and base.id in local and depth < 8:
            out.update(_methods(local[base.id], local, depth + 1))
    out.update({n.name: n for n in cls.body if isinstance(n, ast.FunctionDef)})
    return out


def _takes_positional(fn: ast.FunctionDef, count: int) -> bool:
    params = [*fn.args.posonlyargs, *fn.args.args][1:]  # self
    return fn.args.vararg is not None or len(params) >= count


def _takes_keyword(fn: ast.FunctionDef, name: str) -> bool:
    names = {a.arg for a in [*fn.args.args, *fn.args.kwonlyargs]}
    return name in names or fn.args.kwarg is not None
