"""The index's per-file count (0.2 s on the K3 index) is paid only where the header scan does not prove the index.

`integrate inspect` opens a checkpoint with the shard files its index's naming implies (model-00001-of-00004...), not
counted; the scan proves the index lists exactly those files and each shard's names under its own. Where it does not,
the index is counted and every mistake is still the one-line error of a bad input (exit 2).
"""

import gc
import json
from pathlib import Path

import pytest
from cli_runner import assert_bad_input, integrate
from click.testing import CliRunner
from dayone.checkpoint import coverage, reader
from dayone.checkpoint.reader import INDEX_NAME, open_local
from dayone.checkpoint.scan import scan_coverage
from dayone.checkpoint.writer import plan_shards, shard_name, write_shard
from dayone.commands.inspect_cmd import inspect
from dayone.spec.hf_config import to_hf_config
from dayone.spec.manifest import build_manifest
from dayone.spec.registry import load_spec

SHARDS = 4
SPEC = "kimi-linear-48b-a3b"


@pytest.fixture(scope="module")
def kimi_linear():
    spec = load_spec(SPEC)
    return spec, build_manifest(spec)


def write(root: Path, spec, shards: dict[str, list], pairs: list[tuple[str, str]]) -> Path:
    """A sparse checkpoint: `shards` file -> tensors in header order; the index's pairs as given (a name may repeat)."""
    root.mkdir()
    (root / "config.json").write_text(json.dumps(to_hf_config(spec), indent=1))
    for file, tensors in shards.items():
        write_shard(root / file, tensors, None)
    body = ",\n    ".join(f'"{name}": "{file}"' for name, file in pairs)
    (root / INDEX_NAME).write_text('{\n  "metadata": {},\n  "weight_map": {\n    ' + body + "\n  }\n}\n")
    return root


def layout(manifest, count: int = SHARDS) -> dict[str, list]:
    return {shard_name(i, count): list(s) for i, s in enumerate(plan_shards(manifest.tensors, count))}


def pairs_of(shards: dict[str, list]) -> list[tuple[str, str]]:
    return [(t.name, file) for file, tensors in shards.items() for t in tensors]


@pytest.fixture
def never_counted(monkeypatch):
    monkeypatch.setattr(reader, "_index_file_counts", lambda path: pytest.fail(f"counted {path}"))


@pytest.mark.parametrize("sort_index", [False, True], ids=["index in manifest order", "index sorted by name"])
def test_a_proven_index_is_not_counted(tmp_path, kimi_linear, never_counted, sort_index):
    """Read once alongside the scan, in manifest order or sorted by name: proven, never counted; the per-file counts
    come from the scan."""
    spec, manifest = kimi_linear
    shards = layout(manifest)
    pairs = pairs_of(shards)
    root = write(tmp_path / "ok", spec, shards, sorted(pairs) if sort_index else pairs)
    checkpoint = open_local(root, read_headers=False)
    assert checkpoint.files_inferred and checkpoint.shard_files == list(shards)
    result, _ = scan_coverage(manifest, checkpoint)
    assert result.ok
    assert checkpoint.index_counts == {file: len(tensors) for file, tensors in shards.items()}


@pytest.mark.parametrize("spec_args", [["--spec", SPEC], []], ids=["spec given", "spec derived"])
def test_inspect_of_a_proven_checkpoint_does_not_count_the_index(tmp_path, kimi_linear, never_counted, spec_args):
    """Nor does deriving the spec count it: inspect takes only the model from the spec, not the release's shard count
    (which the scan proves)."""
    spec, manifest = kimi_linear
    shards = layout(manifest)
    root = write(tmp_path / "ok", spec, shards, pairs_of(shards))
    try:
        result = CliRunner().invoke(inspect, [str(root), *spec_args, "--json"])
    finally:
        gc.unfreeze()  # inspect freezes what it leaves (it ends its process; this one goes on)
    assert result.exit_code == 0, result.output + repr(result.exception)
    report = json.loads(result.output)
    assert report["ok"] and report["shards"] == SHARDS and report["tensors"] == len(manifest)
    assert report["spec"] == SPEC


def test_an_unproven_index_is_counted(tmp_path, kimi_linear, monkeypatch):
    """The control of the test above: a planted mistake makes the scan ask for the count."""
    spec, manifest = kimi_linear
    shards = layout(manifest)
    pairs = pairs_of(shards)
    pairs[5] = (pairs[5][0], shard_name(2, SHARDS))
    root = write(tmp_path / "bad", spec, shards, pairs)
    counted = []
    count = reader._index_file_counts
    monkeypatch.setattr(reader, "_index_file_counts", lambda path: counted.append(path) or count(path))
    with pytest.raises(reader.InputError):
        scan_coverage(manifest, open_local(root, read_headers=False))
    assert counted


def test_an_index_naming_a_shard_outside_its_sequence_is_scanned_whole(tmp_path, kimi_linear, monkeypatch):
    """Four shards named model-0000i-of-00004 and a fifth, extra.safetensors, listed between them: the naming implies
    four; the scan does not prove the index, which is counted, and the five it names are scanned."""
    spec, manifest = kimi_linear
    five = list(layout(manifest, 5).values())
    shards = {shard_name(0, 4): five[0], shard_name(1, 4): five[1], "extra.safetensors": five[2]}
    shards |= {shard_name(2, 4): five[3], shard_name(3, 4): five[4]}
    root = write(tmp_path / "extra", spec, shards, pairs_of(shards))
    checkpoint = open_local(root, read_headers=False)
    assert checkpoint.shard_files == [shard_name(i, 4) for i in range(4)]  # the guess, not yet the index's own
    monkeypatch.setattr(coverage, "explain_misplaced", lambda *_: pytest.fail("fell back to the full check"))
    result, scanned = scan_coverage(manifest, checkpoint)
    assert result.ok and sorted(r.file for r in scanned) == sorted(shards) == checkpoint.files
    # `files` never gives the guess: before any scan it is the index's own five (what a run's cache key digests)
    assert open_local(root, read_headers=False).files == sorted(shards)


def name_listed_twice(shards, pairs):
    """The index lists a name of the first shard again in place of a name of the last (per-file counts kept)."""
    kept, dropped = pairs[1][0], pairs[-3][0]
    pairs[:] = [(kept if n == dropped else n, f) for n, f in pairs]
    return kept, dropped


def name_in_the_wrong_file(shards, pairs):
    name, _ = pairs[7]
    pairs[7] = (name, shard_name(2, SHARDS))
    return (name,)


def missing_file_in_the_sequence(shards, pairs):
    name, _ = pairs[9]
    pairs[9] = (name, shard_name(8, SHARDS))
    return (shard_name(8, SHARDS),)


def missing_file_outside_the_sequence(shards, pairs):
    name, _ = pairs[len(pairs) // 2]
    pairs[len(pairs) // 2] = (name, "extra.safetensors")
    return ("extra.safetensors",)


def pair_added_in_a_missing_file(shards, pairs):
    """Every shard's names listed under its own file, and one more pair naming a file that is not there."""
    pairs.insert(len(pairs) // 2, ("model.layers.0.extra.weight", "extra.safetensors"))
    return ("extra.safetensors",)


def shard_deleted(shards, pairs):
    """A file of the sequence missing on disk: the naming's guess fails at open, and the index is counted there."""
    del shards[shard_name(2, SHARDS)]
    return (shard_name(2, SHARDS),)


@pytest.mark.parametrize("sort_index", [False, True], ids=["manifest order", "sorted"])
@pytest.mark.parametrize(
    "mistake",
    [
        name_listed_twice,
        name_in_the_wrong_file,
        missing_file_in_the_sequence,
        missing_file_outside_the_sequence,
        pair_added_in_a_missing_file,
        shard_deleted,
    ],
    ids=lambda f: f.__name__,
)
def test_a_planted_index_mistake_is_one_line(tmp_path, kimi_linear, mistake, sort_index):
    spec, manifest = kimi_linear
    shards = layout(manifest)
    pairs = pairs_of(shards)
    culprits = mistake(shards, pairs)
    root = write(tmp_path / "bad", spec, shards, sorted(pairs) if sort_index else pairs)
    line = assert_bad_input(integrate("inspect", root, "--spec", SPEC))
    assert any(repr(name) in line for name in culprits), line
