"""inspect's fast path (dayone.checkpoint.scan) answers what the plain reader (coverage.reference_coverage) answers, on
every checkpoint layout the tests build, whole and with one thing wrong: the same Coverage, the same per-shard counts
and bytes, or the same one-line InputError. And on the layout releases have it needs no plain reading at all.

Layouts (headers x index):
- dayone's writer: headers and index in manifest order;
- names sorted, compact JSON: each header's tensors sorted by name, data in that order; index in manifest order;
- the safetensors library's own order: every shard written by safetensors.torch.save_file; index in manifest order;
- the transformers save order: the library's shards and the index as save_pretrained writes it (keys sorted);
- one file: model.safetensors written by the library, no index.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from dayone.checkpoint import scan
from dayone.checkpoint.coverage import reference_coverage
from dayone.checkpoint.reader import INDEX_NAME, SINGLE_NAME, open_local
from dayone.checkpoint.scan import scan_coverage
from dayone.checkpoint.writer import encode_header, plan_shards, shard_name
from dayone.core.errors import InputError
from dayone.spec.hf_config import to_hf_config
from dayone.spec.manifest import Tensor, build_manifest
from dayone.spec.registry import load_spec
from dayone.synth import scaled_spec
from safetensors.torch import save_file

SHARDS = 6
TORCH_DTYPES = {"BF16": torch.bfloat16, "F32": torch.float32, "U8": torch.uint8, "I8": torch.int8}


@pytest.fixture(scope="module")
def tiny_k3():
    """The K3 at tiny scale (7,044 tensors, 7 MB): BF16 and F32 tensors, MXFP4 expert blocks and scales in U8."""
    spec = scaled_spec(load_spec("kimi-k3"), "tiny", None)
    return spec, build_manifest(spec)


def write_library_shard(path: Path, shard: list[Tensor]) -> None:
    save_file({t.name: torch.zeros(t.shape, dtype=TORCH_DTYPES[t.dtype]) for t in shard}, path, {"format": "pt"})


def write_compact_shard(path: Path, shard: list[Tensor]) -> None:
    """dayone's writer's header (compact JSON, data in the order listed), data left a hole."""
    header, size = encode_header(shard, {"format": "pt"})
    with open(path, "wb") as f:
        f.write(header)
        f.truncate(len(header) + size)


LAYOUTS = {
    # name: (header writer, header order, index keys sorted)
    "dayone's writer": (write_compact_shard, None, False),
    "names sorted, compact JSON": (write_compact_shard, lambda shard: sorted(shard, key=lambda t: t.name), False),
    "the safetensors library's own order": (write_library_shard, None, False),
    "the transformers save order": (write_library_shard, None, True),
    "one file": (write_library_shard, None, None),
}


def write(root: Path, spec, layout: str, shards: list[list[Tensor]], pairs: list[tuple[str, str]]) -> Path:
    """The checkpoint `layout` writes; the index from `pairs` as raw text (a name may be listed twice)."""
    writer, order, sort_index = LAYOUTS[layout]
    root.mkdir()
    (root / "config.json").write_text(json.dumps(to_hf_config(spec), indent=1))
    if sort_index is None:
        writer(root / SINGLE_NAME, [t for shard in shards for t in shard])
        return root
    for i, shard in enumerate(shards):
        writer(root / shard_name(i, len(shards)), order(shard) if order else shard)
    listed = sorted(pairs) if sort_index else pairs
    body = ",\n    ".join(f'"{name}": "{file}"' for name, file in listed)
    (root / INDEX_NAME).write_text(
        '{\n  "metadata": {\n    "total_size": 1\n  },\n  "weight_map": {\n    ' + body + "\n  }\n}\n"
    )
    return root


def answer(check, root: Path, manifest):
    """A check's answer on a freshly opened checkpoint: its Coverage and per-shard counts, or the InputError's line."""
    try:
        coverage, shards = check(manifest, open_local(root, read_headers=False))
    except InputError as err:
        return str(err)
    return coverage.as_dict(), sorted((s.file, s.tensors, s.seen, s.bytes_by_dtype) for s in shards)


def nothing(shards, pairs):
    pass


def shape_transposed(shards, pairs):
    t = next(t for t in shards[2] if len(t.shape) == 2 and t.shape[0] != t.shape[1] and t.dtype == "BF16")
    shards[2][shards[2].index(t)] = t._replace(shape=t.shape[::-1])


def scales_as_i8(shards, pairs):
    t = next(t for t in shards[3] if t.dtype == "U8")
    shards[3][shards[3].index(t)] = t._replace(dtype="I8")


def a_longer_tensor(shards, pairs):
    t = next(t for t in shards[1] if t.dtype == "BF16" and len(t.shape) == 1)
    shards[1][shards[1].index(t)] = t._replace(shape=(t.shape[0] * 2,))


def an_extra_tensor(shards, pairs):
    shards[4].append(Tensor("language_model.model.layers.0.self_attn.extra.weight", (3,), "BF16", "extra"))
    pairs.append((shards[4][-1].name, shard_name(4, len(shards))))


def a_missing_tensor(shards, pairs):
    gone = shards[2].pop(5)
    pairs.remove((gone.name, shard_name(2, len(shards))))


def a_copy_in_place_of_a_missing_one(shards, pairs):
    """The last shard's last tensor replaced by a copy of one the first shard holds; the index still lists the
    missing name: per-file counts agree."""
    shards[-1][-1] = shards[0][3]


def swapped_between_shards(shards, pairs):
    shards[0][5], shards[1][7] = shards[1][7], shards[0][5]


def index_swaps_two_files(shards, pairs):
    a, b = shards[1][2].name, shards[2][9].name
    files = dict(pairs)
    pairs[:] = [(n, files[b] if n == a else files[a] if n == b else f) for n, f in pairs]


def index_lists_a_name_twice(shards, pairs):
    kept, dropped = shards[0][1].name, shards[3][2].name
    pairs[:] = [(kept if n == dropped else n, f) for n, f in pairs]


def index_names_another_file(shards, pairs):
    name, _ = pairs[9]
    pairs[9] = (name, "extra.safetensors")


CHANGES = [
    nothing,
    shape_transposed,
    scales_as_i8,
    a_longer_tensor,
    an_extra_tensor,
    a_missing_tensor,
    a_copy_in_place_of_a_missing_one,
    swapped_between_shards,
    index_swaps_two_files,
    index_lists_a_name_twice,
    index_names_another_file,
]
ONLY_SHARDED = {swapped_between_shards, index_swaps_two_files, index_lists_a_name_twice, index_names_another_file}


# One file holds every tensor and has no index: a change of who holds what, or of the index, is no change there.
CASES = [
    (layout, change) for layout in LAYOUTS for change in CHANGES if layout != "one file" or change not in ONLY_SHARDED
]


@pytest.mark.parametrize(("layout", "change"), CASES, ids=[f"{layout}-{change.__name__}" for layout, change in CASES])
def test_the_scan_answers_as_the_plain_reader(tmp_path, tiny_k3, layout, change):
    spec, manifest = tiny_k3
    shards = [list(shard) for shard in plan_shards(manifest.tensors, SHARDS)]
    pairs = [(t.name, shard_name(i, SHARDS)) for i, shard in enumerate(shards) for t in shard]
    change(shards, pairs)
    root = write(tmp_path / "k3", spec, layout, shards, pairs)
    fast, plain = answer(scan_coverage, root, manifest), answer(reference_coverage, root, manifest)
    assert fast == plain
    if change is nothing:
        assert not isinstance(plain, str) and plain[0]["counts"] == {"missing": 0, "unexpected": 0, "mismatched": 0}
    else:  # the control: each change is one the reference sees
        assert isinstance(plain, str) or plain[0]["counts"] != {"missing": 0, "unexpected": 0, "mismatched": 0}, plain


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_a_whole_checkpoint_needs_no_plain_reading(tmp_path, tiny_k3, monkeypatch, layout):
    """Every layout above, whole, is proven without the reference; on the layouts releases have (the library's
    headers) no shard is read by the plain reader either."""
    spec, manifest = tiny_k3
    shards = [list(shard) for shard in plan_shards(manifest.tensors, SHARDS)]
    pairs = [(t.name, shard_name(i, SHARDS)) for i, shard in enumerate(shards) for t in shard]
    root = write(tmp_path / "k3", spec, layout, shards, pairs)
    monkeypatch.setattr(scan, "reference_coverage", lambda *_: pytest.fail("the plain reader decided"))
    if LAYOUTS[layout][0] is write_library_shard:
        monkeypatch.setattr(scan.workers, "read_header", lambda *_: pytest.fail("a shard was read plainly"))
    coverage, proven = scan_coverage(manifest, open_local(root, read_headers=False))
    assert coverage.ok and sum(s.tensors for s in proven) == len(manifest) == 7044
