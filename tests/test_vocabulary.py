"""One vocabulary: the targets, stages, statuses, dtype names, GPU architectures, capture points and routed-expert
tensor names are written in dayone.core.vocabulary, the names of HF config keys in dayone.spec.hf_keys, and nowhere
else. A list, tuple, set or Literal in dayone's source that spells out one of these sets again (or a dict keyed by,
or mapping onto, all dtypes or both MXFP4 tensor names) is a second table, which would drift from the first."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import get_args

import pytest
from dayone.core import vocabulary
from dayone.spec.hf_keys import CONFIG_MAPPING

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ("adapters", "core", "kernels", "pipeline", "spec")
OWN = {ROOT / "core" / "vocabulary.py", ROOT / "spec" / "hf_keys.py"}
# Shipped verbatim into generated packages, which cannot import dayone (adapters/targets/common.py: SHIPPED).
SHIPPED = {ROOT / "adapters" / "weightmap" / "walk.py"}
SETS = {
    "targets": set(vocabulary.TARGETS),
    "stages": set(vocabulary.STAGES),
    "statuses": {vocabulary.PASS, vocabulary.FAIL, vocabulary.NOT_RUN},
    "dtypes": set(vocabulary.DTYPES),
    "archs": set(vocabulary.ARCHS),
    "layer capture points": set(vocabulary.LAYER_POINTS) - set(vocabulary.ROUTE_POINTS),
    "head capture points": set(vocabulary.HEAD_POINTS),
    "expert projections": set(vocabulary.EXPERT_PROJECTIONS),
    "MXFP4 tensor names": set(vocabulary.MXFP4_PARTS.values()),
}
# The names a config key goes by (num_experts, num_local_experts, n_routed_experts): spec/hf_keys.py's table.
SETS |= {f"config names of {k.spec}": set(k.names) for k in CONFIG_MAPPING if k.aliases}
DICT_SETS = ("dtypes", "MXFP4 tensor names")


def test_literals_and_tuples_agree():
    assert get_args(vocabulary.Target) == vocabulary.TARGETS
    assert get_args(vocabulary.Stage) == vocabulary.STAGES
    assert get_args(vocabulary.DType) == vocabulary.DTYPES
    assert get_args(vocabulary.Arch) == vocabulary.ARCHS
    assert set(get_args(vocabulary.StageStatus)) == {*get_args(vocabulary.Status), vocabulary.PARTIAL}
    assert set(vocabulary.ENGINES) | set(vocabulary.TRAINERS) == set(vocabulary.TARGETS)
    assert set(vocabulary.TARGET_TITLES) == set(vocabulary.TARGETS)
    assert vocabulary.TARGETED_STAGES <= set(vocabulary.STAGES)


def _spelled_sets(tree: ast.AST):
    """(line, name) for each list/tuple/set literal or Literal[...] holding a whole vocabulary set."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            groups, names = [node.elts], SETS
        elif isinstance(node, ast.Dict):
            # keyed by (or mapping onto) all dtypes is a dtype table ({"bfloat16": "BF16", ...}); a dict keyed by all
            # targets holds each target's own data (its layout, its generator), which is allowed
            groups, names = [node.keys, node.values], DICT_SETS
        else:
            continue
        for elements in groups:
            strings = {e.value for e in elements if isinstance(e, ast.Constant) and isinstance(e.value, str)}
            for name in names:
                if SETS[name] <= strings:
                    yield node.lineno, name


def second_tables(paths) -> list[str]:
    found = []
    for path in paths:
        for line, name in _spelled_sets(ast.parse(path.read_text(), str(path))):
            found.append(f"{path.relative_to(ROOT)}:{line}: the {name} again")
    return found


def test_no_module_keeps_its_own_table():
    paths = [p for folder in SOURCES for p in sorted((ROOT / folder).rglob("*.py")) if p not in OWN | SHIPPED]
    assert second_tables(paths) == []


@pytest.mark.parametrize(
    "source, name",
    [
        ('TARGETS = ("sglang", "vllm", "miles", "megatron-bridge")', "targets"),
        ('Kind = Literal["pass", "fail", "not run"]', "statuses"),
        ('ok = {"bfloat16", "float16", "float32"}', "dtypes"),
        ('STORED = {"bfloat16": "BF16", "float16": "F16", "float32": "F32"}', "dtypes"),
        ('BACK = {"BF16": "bfloat16", "F16": "float16", "F32": "float32"}', "dtypes"),
        ('PROJ = ("gate", "down", "up")', "expert projections"),
        ('HEAD = ("output_res", "final_norm", "logits")', "head capture points"),
        ('PARTS = {"packed": "weight_packed", "scale": "weight_scale"}', "MXFP4 tensor names"),
        ('EXPERTS = ("num_experts", "num_local_experts", "n_routed_experts")', "config names of moe.num_experts"),
    ],
)
def test_the_check_finds_a_planted_table(source, name):
    assert [n for _, n in _spelled_sets(ast.parse(source))] == [name]
