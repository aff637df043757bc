"""One vocabulary: the targets, stages, statuses and dtype names are written in dayone.core.vocabulary and nowhere
else. A list, tuple, set or Literal in dayone's source that spells out one of these sets again is a second table,
which would drift from the first."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import get_args

import pytest
from dayone.core import vocabulary

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ("adapters", "core", "kernels", "pipeline", "spec")
OWN = ROOT / "core" / "vocabulary.py"
# Shipped verbatim into generated packages, which cannot import dayone (adapters/targets/common.py: SHIPPED).
SHIPPED = {ROOT / "adapters" / "weightmap" / "walk.py"}
SETS = {
    "targets": set(vocabulary.TARGETS),
    "stages": set(vocabulary.STAGES),
    "statuses": {vocabulary.PASS, vocabulary.FAIL, vocabulary.NOT_RUN},
    "dtypes": set(vocabulary.DTYPES),
    "archs": set(vocabulary.ARCHS),
}


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
            strings = {e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)}
            for name, words in SETS.items():
                if words <= strings:
                    yield node.lineno, name


def second_tables(paths) -> list[str]:
    found = []
    for path in paths:
        for line, name in _spelled_sets(ast.parse(path.read_text(), str(path))):
            found.append(f"{path.relative_to(ROOT)}:{line}: the {name} again")
    return found


def test_no_module_keeps_its_own_table():
    paths = [p for folder in SOURCES for p in sorted((ROOT / folder).rglob("*.py")) if p != OWN and p not in SHIPPED]
    assert second_tables(paths) == []


@pytest.mark.parametrize(
    "source, name",
    [
        ('TARGETS = ("sglang", "vllm", "miles", "megatron-bridge")', "targets"),
        ('Kind = Literal["pass", "fail", "not run"]', "statuses"),
        ('ok = {"bfloat16", "float16", "float32"}', "dtypes"),
    ],
)
def test_the_check_finds_a_planted_table(source, name):
    assert [n for _, n in _spelled_sets(ast.parse(source))] == [name]
