"""What a framework's model registry and quantization method ask of generated code, read from the release's source.

- protocols: the model class (config.json's architecture) defines every method of the protocols the framework
  checks it against (vLLM: `VllmModelForTextGeneration`, i.e. embed_input_ids, forward, compute_logits, and
  __init__(vllm_config, prefix)), and of every protocol it declares as a base (IsHybrid, HasInnerState): a stub
  method of a protocol (`...` body) is one the model must define itself.
- quantization: every expert parameter the weight table fills is one that the quantization method in use registers
  (vLLM's Mxfp4MoEMethod: `layer.register_parameter("w13_weight", ...)`), so no checkpoint tensor can aim at a
  parameter the framework never creates.
"""

from __future__ import annotations

import ast
from pathlib import Path

from dayone.adapters.weightmap.layouts import INFERENCE_EXPERTS
from dayone.checks.api import Problem, SourceTree, _dotted

# Protocols each target's registry checks the model class against (module, class), beyond the class's own bases.
REGISTRY_PROTOCOLS = {
    "vllm": (("vllm.model_executor.models.interfaces_base", "VllmModelForTextGeneration"),),
}
# The module defining the quantization method for a spec's quantization format, per target.
QUANT_METHOD_MODULES = {
    ("vllm", "mxfp4-pack-quantized"): "vllm.model_executor.layers.quantization.mxfp4",
    ("sglang", "mxfp4-pack-quantized"): "sglang.srt.layers.quantization.mxfp4",  # its compressed-tensors MoE method
}
EXPERT_LEAF_PREFIXES = tuple(dict.fromkeys(f"{stem}_" for stem, _, _ in INFERENCE_EXPERTS.values()))  # w13_, w2_


def check_protocols(path: Path, shown: str, tree: SourceTree, target: str, arch: str) -> list[Problem]:
    module = ast.parse(path.read_text())
    local = {n.name: n for n in module.body if isinstance(n, ast.ClassDef)}
    cls = local.get(arch)
    if cls is None:
        return [Problem(shown, 0, f"defines no class {arch} (config.json's architecture)")]
    imported = _imported_names(module)
    protocols = [tree.lookup(m, name) for m, name in REGISTRY_PROTOCOLS.get(target, ())]
    for base in cls.bases:
        name = _dotted(base)
        if name in imported:
            found = tree.lookup(*imported[name])
            if found is not None and found.kind == "class" and _is_protocol(tree, found):
                protocols.append(found)
    have = _methods(cls, local)
    problems = []
    for protocol in (p for p in protocols if p is not None):
        for method in sorted(_stubs(tree, protocol) - have):
            message = (
                f"{arch} lacks {method}(), required by {protocol.node.name} ({protocol.module}) in the pinned release"
            )
            problems.append(Problem(shown, cls.lineno, message))
    return problems


def _imported_names(module: ast.Module) -> dict[str, tuple[str, str]]:
    out = {}
    for node in ast.walk(module):
        if isinstance(node, ast.ImportFrom) and not node.level and node.module:
            for alias in node.names:
                out[alias.asname or alias.name] = (node.module, alias.name)
    return out


def _methods(cls: ast.ClassDef, local: dict[str, ast.ClassDef], depth: int = 0) -> set[str]:
    names = {n.name for n in cls.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}
    for base in cls.bases:
        name = _dotted(base)
        if name in local and depth < 8:
            names |= _methods(local[name], local, depth + 1)
    return names


def _is_protocol(tree: SourceTree, definition, depth: int = 0) -> bool:
    if any(_dotted(b) in ("Protocol", "typing.Protocol") for b in definition.node.bases):
        return True
    return depth < 8 and any(_is_protocol(tree, b, depth + 1) for b in tree.bases(definition))


def _stubs(tree: SourceTree, protocol, depth: int = 0) -> set[str]:
    """Methods of a protocol (and its protocol bases) whose body is only a docstring and `...`."""
    out = set()
    for node in protocol.node.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and _is_stub(node):
            out.add(node.name)
    if depth < 8:
        for base in tree.bases(protocol):
            if _is_protocol(tree, base):
                out |= _stubs(tree, base, depth + 1)
    return out


def _is_stub(node: ast.FunctionDef) -> bool:
    last = node.body[-1]
    return isinstance(last, ast.Expr) and isinstance(last.value, ast.Constant) and last.value.value is Ellipsis


def registered_parameters(tree: SourceTree, module: str) -> set[str]:
    """Names a quantization method's module registers on its layers (`register_parameter("name", ...)`)."""
    parsed = tree.parse(module)
    if parsed is None:
        return set()
    names = set()
    for node in ast.walk(parsed):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "register_parameter"
            and node.args
            and isinstance(node.args[0], ast.Constant)
        ):
            names.add(node.args[0].value)
    return names


def check_quantized_names(table, tree: SourceTree, target: str, quant_format: str | None, shown: str) -> list[str]:
    if quant_format is None:
        return []
    module = QUANT_METHOD_MODULES.get((target, quant_format))
    if module is None:
        return []
    registered = registered_parameters(tree, module)
    if not registered:
        return [f"{shown}: {module} registers no parameters in the pinned release (cannot check expert names)"]
    problems = []
    for param in table.PARAMS:
        leaf = param.name.rsplit(".", 1)[-1]
        if ".experts." in param.name and leaf.startswith(EXPERT_LEAF_PREFIXES) and leaf not in registered:
            problems.append(
                f"{shown}: {param.name}: the quantization method ({module}) registers no parameter {leaf!r} "
                f"in the pinned release ({', '.join(sorted(registered))})"
            )
    return problems
