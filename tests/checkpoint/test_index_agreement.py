"""The coverage verdict is exact: every shard holds exactly the names the index assigns to it, no tensor twice.

Per-file counts and the number of expected names seen agree with a checkpoint where one shard holds a second copy of
another shard's tensor in place of a missing one, or two shards swapped tensors; these must still be refused, naming
the tensor (an InputError: exit 2), by the fast path (dayone.checkpoint.scan: each shard's names against the index
read once) and by the plain reader (check_coverage).
"""

import json
import random
from pathlib import Path

import pytest
from cli_runner import integrate
from dayone.checkpoint.coverage import check_coverage
from dayone.checkpoint.reader import INDEX_NAME, open_local
from dayone.checkpoint.scan import scan_coverage
from dayone.checkpoint.writer import plan_shards, shard_name, write_shard
from dayone.core.errors import InputError
from dayone.spec.hf_config import to_hf_config
from dayone.spec.manifest import build_manifest
from dayone.spec.registry import load_spec

SHARDS = 4


@pytest.fixture(scope="module")
def kimi_linear():
    spec = load_spec("kimi-linear-48b-a3b")
    return spec, build_manifest(spec)


def base_layout(manifest) -> list[list]:
    return [list(shard) for shard in plan_shards(manifest.tensors, SHARDS)]


def index_pairs(shards: list[list]) -> list[tuple[str, str]]:
    return [(t.name, shard_name(i, len(shards))) for i, shard in enumerate(shards) for t in shard]


def write(root: Path, spec, shards: list[list], pairs: list[tuple[str, str]], header_order=None) -> Path:
    """A sparse checkpoint whose headers and index are given separately (the index as raw text: a name may repeat)."""
    root.mkdir()
    (root / "config.json").write_text(json.dumps(to_hf_config(spec), indent=1))
    for i, shard in enumerate(shards):
        write_shard(root / shard_name(i, len(shards)), header_order(shard) if header_order else shard, None)
    body = ",\n    ".join(f'"{name}": "{file}"' for name, file in pairs)
    (root / INDEX_NAME).write_text(
        '{\n  "metadata": {\n    "total_size": 1\n  },\n  "weight_map": {\n    ' + body + "\n  }\n}\n"
    )
    return root


def by_name(shard: list) -> list:
    return sorted(shard, key=lambda t: t.name)


def verdicts(root: Path, manifest) -> list:
    """scan_coverage's and check_coverage's answer: a Coverage, or the InputError's message."""
    answers = []
    for check in (lambda c: scan_coverage(manifest, c)[0], lambda c: check_coverage(manifest, c)):
        try:
            answers.append(check(open_local(root, read_headers=False)))
        except InputError as err:
            answers.append(str(err))
    return answers


def planted_duplicate(shards, pairs):
    """The last shard's last tensor replaced by a copy of a tensor the first shard holds; the index still lists the
    missing name (the reproduction of /tmp/helper-i/dup)."""
    missing, copy = shards[-1][-1], shards[0][3]
    shards[-1][-1] = copy
    return [copy.name, missing.name]


def duplicate_listed_twice(shards, pairs):
    missing, copy = shards[-1][-1], shards[0][3]
    shards[-1][-1] = copy
    pairs[:] = [(copy.name, file) if name == missing.name else (name, file) for name, file in pairs]
    return [copy.name]


def swapped_between_shards(shards, pairs):
    a, b = shards[0][5], shards[1][7]
    shards[0][5], shards[1][7] = b, a
    return [a.name, b.name]


def index_swaps_two_files(shards, pairs):
    a, b = shards[1][2].name, shards[2][9].name
    files = dict(pairs)
    pairs[:] = [(n, files[b] if n == a else files[a] if n == b else f) for n, f in pairs]
    return [a, b]


def index_lists_a_stranger(shards, pairs):
    held = shards[2][4].name
    pairs[:] = [("model.layers.0.not_a_tensor.weight" if n == held else n, f) for n, f in pairs]
    return [held, "model.layers.0.not_a_tensor.weight"]


def index_lists_a_name_twice(shards, pairs):
    """A name listed under its own file and again, in place of another name of another file: counts still match."""
    kept, dropped = shards[0][1].name, shards[3][2].name
    pairs[:] = [(kept if n == dropped else n, f) for n, f in pairs]
    return [kept, dropped]


DISAGREEMENTS = [
    planted_duplicate,
    duplicate_listed_twice,
    swapped_between_shards,
    index_swaps_two_files,
    index_lists_a_stranger,
    index_lists_a_name_twice,
]
ORDERS = {
    "headers and index in manifest order": (None, False),
    "headers sorted by name": (by_name, False),
    "index sorted by name": (None, True),
    "both sorted by name": (by_name, True),
}


@pytest.mark.parametrize("order", list(ORDERS))
def test_an_agreeing_checkpoint_is_covered(tmp_path, kimi_linear, order):
    spec, manifest = kimi_linear
    header_order, sort_index = ORDERS[order]
    shards = base_layout(manifest)
    pairs = sorted(index_pairs(shards)) if sort_index else index_pairs(shards)
    root = write(tmp_path / "ok", spec, shards, pairs, header_order)
    for verdict in verdicts(root, manifest):
        assert not isinstance(verdict, str) and verdict.ok, verdict


@pytest.mark.parametrize("order", list(ORDERS))
@pytest.mark.parametrize("disagreement", DISAGREEMENTS, ids=lambda f: f.__name__)
def test_every_disagreement_is_named(tmp_path, kimi_linear, disagreement, order):
    spec, manifest = kimi_linear
    header_order, sort_index = ORDERS[order]
    shards = base_layout(manifest)
    pairs = index_pairs(shards)
    culprits = disagreement(shards, pairs)
    root = write(tmp_path / "bad", spec, shards, sorted(pairs) if sort_index else pairs, header_order)
    for verdict in verdicts(root, manifest):
        assert isinstance(verdict, str), f"{disagreement.__name__}: reported covered"
        assert any(repr(name) in verdict for name in culprits), verdict


@pytest.mark.parametrize("seed", range(8))
def test_random_disagreements_are_caught(tmp_path, kimi_linear, seed):
    """Random tensors moved, copied or relabelled: any change of who holds what, or of what the index says, with the
    per-file counts kept, is refused."""
    spec, manifest = kimi_linear
    rng = random.Random(seed)
    shards = base_layout(manifest)
    pairs = index_pairs(shards)
    a, b = rng.sample(range(SHARDS), 2)
    i, j = rng.randrange(len(shards[a])), rng.randrange(len(shards[b]))
    kind = rng.choice(["copy", "swap", "relabel"])
    if kind == "copy":
        shards[b][j] = shards[a][i]
    elif kind == "swap":
        shards[a][i], shards[b][j] = shards[b][j], shards[a][i]
    else:
        x, y = shards[a][i].name, shards[b][j].name
        files = dict(pairs)
        pairs = [(n, files[y] if n == x else files[x] if n == y else f) for n, f in pairs]
    header_order = by_name if rng.random() < 0.5 else None
    root = write(tmp_path / "bad", spec, shards, sorted(pairs) if rng.random() < 0.5 else pairs, header_order)
    for verdict in verdicts(root, manifest):
        assert isinstance(verdict, str), f"seed {seed} ({kind}): reported covered"


def test_planted_duplicate_fails_inspect(tmp_path, kimi_linear):
    spec, manifest = kimi_linear
    shards = base_layout(manifest)
    pairs = index_pairs(shards)
    copy, _ = planted_duplicate(shards, pairs)
    result = integrate("inspect", write(tmp_path / "dup", spec, shards, pairs))
    assert result.code == 2, result.out
    assert result.err.count("\n") == 1 and repr(copy) in result.err and "Traceback" not in result.err
