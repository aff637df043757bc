"""Shards in manifest order are compared as runs (EntryTable.run: no name hashed); the verdict is the name-by-name
one. Checked against the expanded manifest on K3's 497k tensors, and end to end through `integrate inspect`."""

import json
from itertools import pairwise

import pytest
from cli_runner import integrate
from dayone.checkpoint.header_proof import prove_written_in_order
from dayone.checkpoint.header_scan import ParsedShard, compare_entries
from dayone.checkpoint.safetensors_header import read_header, read_header_bytes
from dayone.checkpoint.writer import write_checkpoint
from dayone.spec.hf_config import to_hf_config
from dayone.spec.manifest import EntryTable, build_manifest
from dayone.spec.registry import load_spec


@pytest.fixture(scope="module")
def k3():
    manifest = build_manifest(load_spec("kimi-k3"))
    names = [t.name for t in manifest.tensors]
    entries = [(list(t.shape), t.dtype, t.nbytes) for t in manifest.tensors]
    return manifest, names, entries


def test_runs_answer_like_the_expanded_manifest(k3):
    manifest, names, entries = k3
    table = EntryTable(manifest)
    assert len(names) == 497_220
    assert table.run(names) == entries
    first_expert = next(i for i, n in enumerate(names) if ".experts." in n)
    # Starting mid-group, crossing into the next layer's plain tensors and its experts; a plain run alone.
    for begin, end in ((first_expert + 7, first_expert + 9000), (first_expert - 3, first_expert + 2), (0, 4)):
        assert table.run(names[begin:end]) == entries[begin:end]
    assert table.run(names[-5:]) == entries[-5:]


def test_runs_refuse_anything_out_of_order(k3):
    manifest, names, _ = k3
    table = EntryTable(manifest)
    at = next(i for i, n in enumerate(names) if ".experts.5." in n)
    shard = names[at - 40 : at + 40]
    prefix = names[at].rsplit(".experts.", 1)[0] + ".experts."
    swapped = [*shard[:10], shard[11], shard[10], *shard[12:]]
    glued = [*shard[:10], shard[10] + "\n" + shard[11], *shard[12:]]  # one name holding two
    cases = {
        "swapped": swapped,
        "one dropped": shard[:10] + shard[11:],
        "glued with a newline": glued,
        "leading zero": [f"{prefix}05.{shard[0].rsplit('.', 2)[-2]}.weight_packed", *shard[1:]],
        "expert past the last": [f"{prefix}999.w1.weight_packed"],
        "unknown first name": ["model.unknown.weight", *shard],
        "past the manifest's end": [*names[-3:], names[0]],
        "empty": [],
    }
    for label, case in cases.items():
        assert table.run(case) is None, label
    # Out of order is not wrong: the name-by-name lookup still answers.
    assert ParsedShard("x", swapped, table.lookup(swapped), {}).compare(table).seen == len(swapped)


def test_one_wrong_expert_shape_among_497k_fails_the_bulk_comparison(k3):
    manifest, names, entries = k3
    found = [(list(shape), dtype, nbytes) for shape, dtype, nbytes in entries]
    cuts = [len(names) * i // 96 for i in range(97)]  # 96 shards, as the release splits it

    def shards():
        return [ParsedShard(str(i), names[a:b], found[a:b], {}) for i, (a, b) in enumerate(pairwise(cuts))]

    table = EntryTable(manifest)
    assert sum(shard.compare(table).seen for shard in shards()) == 497_220
    wrong = next(i for i, n in enumerate(names) if n.endswith(".experts.611.w2.weight_scale") and ".layers.40." in n)
    shape, dtype, nbytes = found[wrong]
    for bad in (([shape[0], shape[1] * 2], dtype, nbytes * 2), (shape, "I8", nbytes)):
        found[wrong] = bad
        verdicts = [shard.compare(EntryTable(manifest)) for shard in shards()]
        # Only the shard holding it goes to the entry-by-entry check (which names it: the next test).
        assert [i for i, v in enumerate(verdicts) if v is None] == [next(i for i in range(96) if cuts[i + 1] > wrong)]


def test_a_wrong_expert_shape_in_an_ordered_checkpoint_is_named(tmp_path):
    spec = load_spec("kimi-linear-48b-a3b")
    target = "model.layers.12.block_sparse_moe.experts.77.w3.weight"
    tensors = [t._replace(shape=(t.shape[0], t.shape[1] + 1)) if t.name == target else t
               for t in build_manifest(spec).tensors]  # fmt: skip
    out = write_checkpoint(tmp_path / "kl", to_hf_config(spec), tensors, spec.release.num_shards)
    result = integrate("inspect", out, "--json")
    assert result.code == 1, result.err
    report = json.loads(result.out)
    want = next(t for t in build_manifest(spec).tensors if t.name == target).shape
    assert report["mismatched"]["shape"] == [f"{target}: expected {list(want)}, found [{want[0]}, {want[1] + 1}]"]
    assert report["missing"] == report["unexpected"] == [] and report["counts"]["mismatched"] == 1


def test_headers_written_in_order_are_proven_byte_for_byte(tmp_path):
    """prove_written_in_order says yes exactly where the parsed, entry-by-entry verdict is a full match, and no to
    any one-byte change of a header (which the entry-by-entry check then names)."""
    spec = load_spec("kimi-linear-48b-a3b")
    manifest = build_manifest(spec)
    out = write_checkpoint(tmp_path / "kl", to_hf_config(spec), list(manifest.tensors), spec.release.num_shards)
    table = EntryTable(manifest)
    shards = sorted(out.glob("*.safetensors"))
    for path in shards:
        raw, data_start, file_size = read_header_bytes(path)
        proven = prove_written_in_order(raw, file_size - data_start, path, path.name, table)
        header = read_header(path)
        parsed = compare_entries(path.name, header.entries, header.bytes_by_dtype, table)
        assert proven is not None and (proven.tensors, proven.seen) == (parsed.tensors, parsed.seen)
        assert proven.bytes_by_dtype == parsed.bytes_by_dtype and not parsed.unexpected
    raw, data_start, file_size = read_header_bytes(shards[3])
    text = raw.decode()
    first = text.index('"data_offsets":[') + len('"data_offsets":[')
    changes = {
        "a shape": text.replace('"shape":[', '"shape":[1,', 1),
        "a dtype": text.replace('"dtype":"BF16"', '"dtype":"F16\\u0000"', 1),
        "an offset": text[:first] + "1" + text[first + 1 :],
        "a name": text.replace("experts.5.", "experts.6.", 1),
        "one entry dropped": text.replace(',"model.layers', ',"xmodel.layers', 1),
        "spaced": text.replace('":{', '": {', 1),
        "trailing junk": text.rstrip() + "x",
        "metadata not strings": text.replace('"format":"pt"', '"format":1', 1),
    }
    for label, changed in changes.items():
        assert changed != text, label
        verdict = prove_written_in_order(changed.encode(), file_size - data_start, shards[3], "x", table)
        assert verdict is None, label
    assert prove_written_in_order(raw, file_size - data_start - 1, shards[3], "x", table) is None  # a byte short
