"""Headers in the safetensors library's own order, written by the library itself (safetensors.torch.save_file, as
transformers' save_pretrained does for a real release), are proven byte for byte against the text the manifest
predicts (dayone.checkpoint.scan.proof), with no JSON parsed per entry and the index read once for the parent;
anything off in them is refused by the proof and named through the real `integrate inspect`.
"""

import importlib.util
import itertools
import json
import shutil
from pathlib import Path

import pytest
import torch
from cli_runner import assert_bad_input, integrate
from dayone.checkpoint import scan
from dayone.checkpoint.coverage import compare_entries
from dayone.checkpoint.reader import INDEX_NAME, open_local
from dayone.checkpoint.safetensors_header import read_header, read_header_bytes
from dayone.checkpoint.scan import scan_coverage
from dayone.checkpoint.scan.index import read_listing as scan_read_listing
from dayone.checkpoint.scan.proof import Expected, RunChain, prove_header
from dayone.checkpoint.scan.runs import ManifestRuns
from dayone.checkpoint.scan.text import SAFETENSORS_DTYPE_ORDER
from dayone.checkpoint.writer import plan_shards, shard_name, write_shard
from dayone.spec.hf_config import to_hf_config
from dayone.spec.manifest import EntryTable, ExpertGroup, Manifest, build_manifest
from dayone.spec.registry import load_spec
from dayone.synth import scaled_spec
from safetensors.torch import save_file

TORCH_DTYPES = {"BF16": torch.bfloat16, "F32": torch.float32, "U8": torch.uint8, "I8": torch.int8}
ROOT = Path(__file__).resolve().parents[2]


def library_release(root: Path, config: dict, shards: list[list], metadata=None) -> Path:
    """A release as transformers writes one: each shard by safetensors.torch.save_file, the index with its keys
    sorted (json.dumps(index, indent=2, sort_keys=True)). `shards`: lists of (name, shape, dtype)."""
    root.mkdir()
    (root / "config.json").write_text(json.dumps(config, indent=2))
    weight_map = {}
    for i, shard in enumerate(shards):
        file = shard_name(i, len(shards))
        tensors = {name: torch.ones(shape, dtype=TORCH_DTYPES[dtype]) for name, shape, dtype in shard}
        save_file(tensors, root / file, metadata={"format": "pt"} if metadata is None else metadata)
        weight_map.update(dict.fromkeys(tensors, file))
    index = {"metadata": {"total_size": 1}, "weight_map": weight_map}
    (root / INDEX_NAME).write_text(json.dumps(index, indent=2, sort_keys=True) + "\n")
    return root


def as_rows(tensors) -> list[tuple]:
    return [(t.name, t.shape, t.dtype) for t in tensors]


def expected(manifest: Manifest) -> Expected:
    return Expected(EntryTable(manifest), ManifestRuns(manifest))


def proof_of(path: Path, manifest_or_expected, chain: RunChain | None = None, raw: bytes | None = None, cut: int = 0):
    """prove_header on the shard at `path` (or on `raw` in place of its header; `cut` bytes short of its data)."""
    header, data_start, file_size = read_header_bytes(path)
    table = manifest_or_expected if isinstance(manifest_or_expected, Expected) else expected(manifest_or_expected)
    data_size = file_size - data_start - cut
    return prove_header(header if raw is None else raw, data_size, path, path.name, table, chain)


@pytest.fixture(scope="module")
def tiny_k3():
    """The K3 at tiny scale: BF16 and F32 tensors, MXFP4 expert blocks and scales in U8, 96 shards."""
    spec = scaled_spec(load_spec("kimi-k3"), "tiny", None)
    return spec, build_manifest(spec)


@pytest.fixture(scope="module")
def release(tmp_path_factory, tiny_k3) -> Path:
    spec, manifest = tiny_k3
    shards = [as_rows(shard) for shard in plan_shards(manifest.tensors, spec.release.num_shards)]
    return library_release(tmp_path_factory.mktemp("st") / "k3", to_hf_config(spec), shards)


def header_text(path: Path) -> str:
    return read_header_bytes(path)[0].decode()


def test_the_library_orders_by_dtype_alignment_then_name(tmp_path):
    """What scan.text.SAFETENSORS_DTYPE_ORDER says of the library, checked on a file it writes: entries by dtype
    descending in that order, then by name; data laid out in the same order; __metadata__ first; the header padded
    with spaces to a multiple of 8 bytes. The benchmark's copy of a release (benchmarks/cli.py) writes the same bytes."""
    rows = [
        ("b.scales", (3,), "I8"), ("a.blocks", (2, 5), "U8"), ("b.blocks", (7,), "U8"), ("z.norm", (3,), "F32"),
        ("a.weight", (2, 3), "BF16"), ("a.bias", (1,), "F32"), ("m.weight", (4,), "BF16"), ("a.scales", (1,), "I8"),
    ]  # fmt: skip
    root = library_release(tmp_path / "mixed", {}, [rows], metadata={"format": "pt", "note": "x"})
    path = root / shard_name(0, 1)
    raw, data_start, file_size = read_header_bytes(path)
    assert len(raw) % 8 == 0 and raw.decode().endswith("}" + " " * (len(raw) - len(raw.rstrip())))
    header = json.loads(raw)
    assert next(iter(header)) == "__metadata__" and header.pop("__metadata__") == {"format": "pt", "note": "x"}
    rank = SAFETENSORS_DTYPE_ORDER.index
    assert list(header) == sorted(header, key=lambda n: (-rank(header[n]["dtype"]), n))
    assert list(header)[:2] == ["a.bias", "z.norm"] and list(header)[-2:] == ["a.blocks", "b.blocks"]
    offsets = [header[n]["data_offsets"] for n in header]
    assert offsets[0][0] == 0 and offsets[-1][1] == file_size - data_start
    assert all(end == begin for (_, end), (begin, _) in itertools.pairwise(offsets))

    spec = importlib.util.spec_from_file_location("benchmark_cli", ROOT / "benchmarks" / "cli.py")
    benchmark = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(benchmark)
    single = library_release(tmp_path / "single", {}, [rows])  # one metadata key: the library's map order is random
    raw = read_header_bytes(single / shard_name(0, 1))[0]
    parsed = json.loads(raw)
    in_another_order = {n: parsed[n] for n in reversed(list(parsed)) if n != "__metadata__"}
    assert benchmark.safetensors_header(in_another_order, {"format": "pt"}) == (raw, offsets[-1][1])


def test_a_release_the_library_wrote_is_proven_byte_for_byte(release, tiny_k3):
    """Every shard proven as the run of the manifest it holds, in the library's order, as the workers do it (each
    run found from the one before), and from the header alone (a worker's first shard); the verdict is the parsed,
    entry-by-entry one, and the shards hold every tensor once."""
    _, manifest = tiny_k3
    table = expected(manifest)
    chain = RunChain()
    names = []
    for path in sorted(release.glob("*.safetensors")):
        header = read_header(path)
        parsed = compare_entries(path.name, header.entries, header.bytes_by_dtype, table.table)
        for proven in (proof_of(path, table, chain), proof_of(path, manifest)):
            assert proven is not None, path.name
            assert (proven.tensors, proven.seen, proven.bytes_by_dtype) == (
                parsed.tensors,
                parsed.seen,
                parsed.bytes_by_dtype,
            )
            assert proven.names_text == "\n".join(sorted(header.entries)).encode()
        assert chain.proof.__name__ == "_in_safetensors_order"
        assert not parsed.unexpected and not parsed.wrong_shape and not parsed.wrong_dtype
        names += header.entries
    assert sorted(names) == sorted(t.name for t in manifest.tensors) and len(names) == 7044


def test_i8_scales_are_proven_too(tmp_path, tiny_k3):
    """MXFP4 scales stored as I8 instead of U8 (another writer's choice): a fourth dtype, between BF16 and U8 in the
    library's order, proven against a manifest that expects it."""
    spec, manifest = tiny_k3
    items = []
    for item in manifest.items:
        if isinstance(item, ExpertGroup):
            parts = tuple(p._replace(dtype="I8") if p.suffix.endswith("scale") else p for p in item.parts)
            item = item._replace(parts=parts)
        elif item.name.endswith("scale") and item.dtype == "U8":
            item = item._replace(dtype="I8")
        items.append(item)
    with_i8 = Manifest(manifest.spec_name, tuple(items))
    assert {t.dtype for t in with_i8.tensors} == {"BF16", "F32", "U8", "I8"}
    shards = [as_rows(shard) for shard in plan_shards(with_i8.tensors, 8)]
    root = library_release(tmp_path / "i8", to_hf_config(spec), shards)
    table = expected(with_i8)
    chain = RunChain()
    for path in sorted(root.glob("*.safetensors")):
        proven = proof_of(path, table, chain)
        assert proven is not None and proven.bytes_by_dtype == read_header(path).bytes_by_dtype, path.name
    # Against the manifest that expects U8 scales, no proof holds: the plain reader names them.
    assert proof_of(path, manifest) is None


def test_any_change_to_a_library_written_header_is_refused(release, tiny_k3):
    """No proof (of the two) says yes to a header with one thing changed; the plain reader then names it."""
    _, manifest = tiny_k3
    path = release / SHARD
    raw = read_header_bytes(path)[0]
    text = raw.decode()
    assert proof_of(path, manifest) is not None
    first = text.index('"data_offsets":[0,') + len('"data_offsets":[')
    name, entry = a_tensor(release, "BF16", dims=2)
    rows, cols = entry["shape"][:2]
    expert = next(n for n in json.loads(raw) if ".experts." in n).split(".experts.")[1].split(".")[0]
    changes = {
        "a shape, same bytes": text.replace(
            f'"{name}":{{"dtype":"BF16","shape":[{rows},{cols}', f'"{name}":{{"dtype":"BF16","shape":[{cols},{rows}', 1
        ),
        "a dtype, same bytes": text.replace('"dtype":"U8"', '"dtype":"I8"', 1),
        "an offset": text[:first] + "1" + text[first + 1 :],
        "a name": text.replace(f"experts.{expert}.", f"experts.{int(expert) + 1}.", 1),
        "two entries swapped": swap_first_two_entries(text),
        "spaced": text.replace('":{', '": {', 1),
        "trailing junk": text.rstrip() + "x",
        "metadata not strings": text.replace('"format":"pt"', '"format":1', 1),
    }
    for label, changed in changes.items():
        assert changed != text, label
        assert proof_of(path, manifest, raw=changed.encode()) is None, label
    assert proof_of(path, manifest, cut=1) is None  # a byte short


def swap_first_two_entries(text: str) -> str:
    """The first two tensors' entries (name and all) in each other's place, offsets kept as written."""
    start = text.index("},") + 2  # after __metadata__
    second = text.index(']},"', start) + 3
    third = text.index(']},"', second) + 3
    return text[:start] + text[second : third - 1] + "," + text[start : second - 1] + text[third - 1 :]


def test_inspect_proves_it_with_no_json_parsed_per_entry_and_the_index_read_once(
    release, tiny_k3, monkeypatch, tmp_path
):
    """The whole scan through the proof: no shard goes to the plain reader, the parent reads the index once (in a
    process alongside the workers) and finds it agrees: the plain reader's verdict is never asked for."""
    _, manifest = tiny_k3
    reads = tmp_path / "reads"  # one line per reading of the index, in whichever process it ran

    def read_listing(path):
        with open(reads, "a") as f:
            f.write(f"{path}\n")
        return scan_read_listing(path)

    monkeypatch.setattr(scan.workers, "read_header", lambda *_: pytest.fail("a shard left the byte proof"))
    monkeypatch.setattr(scan, "reference_coverage", lambda *_: pytest.fail("fell back to the plain reader"))
    monkeypatch.setattr(scan, "read_listing", read_listing)
    result, shards = scan_coverage(manifest, open_local(release, read_headers=False))
    assert result.ok and len(shards) == 96 and reads.read_text() == f"{release / INDEX_NAME}\n"
    assert all(s.names_text for s in shards)

    report = integrate("inspect", release, "--json")
    assert report.code == 0, report.err
    assert json.loads(report.out)["tensors"] == len(manifest) and json.loads(report.out)["ok"]


def test_shards_holding_runs_out_of_file_order_are_proven(tmp_path, tiny_k3, monkeypatch):
    """The files hold the manifest's runs in reverse: no shard's run follows its predecessor's in a worker, so each is
    found from its own names; still no plain reading."""
    spec, manifest = tiny_k3
    shards = [as_rows(shard) for shard in plan_shards(manifest.tensors, 12)][::-1]
    root = library_release(tmp_path / "reversed", to_hf_config(spec), shards)
    monkeypatch.setattr(scan.workers, "read_header", lambda *_: pytest.fail("a shard left the byte proof"))
    monkeypatch.setattr(scan, "reference_coverage", lambda *_: pytest.fail("fell back to the plain reader"))
    result, proven = scan_coverage(manifest, open_local(root, read_headers=False))
    assert result.ok and sum(s.tensors for s in proven) == len(manifest)


def test_library_and_dayone_headers_under_dayones_index_are_proven(tmp_path, tiny_k3, monkeypatch):
    """Half the shards by dayone's writer (manifest order), half by the library, under an index in manifest order:
    each header is proven by one of the two proofs, the index read once; no plain reading."""
    spec, manifest = tiny_k3
    shards = list(plan_shards(manifest.tensors, 12))
    root = library_release(tmp_path / "mixed", to_hf_config(spec), [as_rows(shard) for shard in shards])
    for i, shard in enumerate(shards[:6]):
        write_shard(root / shard_name(i, 12), list(shard), None)
    weight_map = {t.name: shard_name(i, 12) for i, shard in enumerate(shards) for t in shard}
    (root / INDEX_NAME).write_text(json.dumps({"metadata": {"total_size": 1}, "weight_map": weight_map}, indent=2))
    monkeypatch.setattr(scan.workers, "read_header", lambda *_: pytest.fail("a shard left the byte proof"))
    monkeypatch.setattr(scan, "reference_coverage", lambda *_: pytest.fail("fell back to the plain reader"))
    result, proven = scan_coverage(manifest, open_local(root, read_headers=False))
    assert result.ok and len(proven) == 12


def resave(root: Path, file: str, change) -> None:
    """Shard `file` written again by the library with `change` applied to its {name: tensor} dict."""
    from safetensors.torch import load_file

    tensors = load_file(root / file)
    change(tensors)
    save_file(tensors, root / file, metadata={"format": "pt"})


def edit_index(root: Path, change) -> None:
    index = json.loads((root / INDEX_NAME).read_text())
    change(index["weight_map"])
    (root / INDEX_NAME).write_text(json.dumps(index, indent=2, sort_keys=True) + "\n")


def rewrite_header(path: Path, change) -> None:
    """The header's text edited in place of the library's (the data region kept)."""
    raw, data_start, _ = read_header_bytes(path)
    data = path.read_bytes()[data_start:]
    text = change(raw.decode().rstrip()).encode()
    path.write_bytes(len(text).to_bytes(8, "little") + text + data)


SHARD = shard_name(40, 96)


def a_tensor(root: Path, dtype: str, shard: str = SHARD, dims: int = 1) -> tuple[str, dict]:
    """The first tensor of `dtype` with at least `dims` dimensions the shard's header lists."""
    header = json.loads(read_header_bytes(root / shard)[0])
    header.pop("__metadata__")
    return next((n, e) for n, e in header.items() if e["dtype"] == dtype and len(e["shape"]) >= dims)


@pytest.fixture
def copy(release, tmp_path) -> Path:
    return Path(shutil.copytree(release, tmp_path / "k3"))


def test_a_transposed_tensor_is_named(copy):
    name, entry = a_tensor(copy, "BF16", dims=2)
    resave(copy, SHARD, lambda t: t.update({name: t[name].T.contiguous()}))
    report = inspect_json(copy, 1)
    assert report["mismatched"]["shape"] == [f"{name}: expected {entry['shape']}, found {entry['shape'][::-1]}"]
    assert report["counts"] == {"missing": 0, "unexpected": 0, "mismatched": 1}


def test_a_tensor_in_another_integer_dtype_is_named(copy):
    name, _ = a_tensor(copy, "U8")
    resave(copy, SHARD, lambda t: t.update({name: t[name].view(torch.int8)}))
    report = inspect_json(copy, 1)
    assert report["mismatched"]["dtype"] == [f"{name}: expected U8, found I8"]
    assert report["counts"] == {"missing": 0, "unexpected": 0, "mismatched": 1}


def test_an_extra_tensor_is_named(copy):
    extra = "language_model.model.layers.0.self_attn.extra.weight"
    resave(copy, SHARD, lambda t: t.update({extra: torch.ones(3, dtype=torch.bfloat16)}))
    edit_index(copy, lambda weight_map: weight_map.update({extra: SHARD}))
    report = inspect_json(copy, 1)
    assert report["unexpected"] == [extra] and report["counts"]["unexpected"] == 1


def test_a_missing_tensor_is_named(copy):
    name, _ = a_tensor(copy, "U8")
    resave(copy, SHARD, lambda t: t.pop(name))
    edit_index(copy, lambda weight_map: weight_map.pop(name))
    report = inspect_json(copy, 1)
    assert report["missing"] == [name] and report["counts"]["missing"] == 1


def test_offsets_that_do_not_tile_are_refused(copy):
    """The first tensor moved one byte on (its extent still its size): a gap before it, an overlap after."""
    name, entry = a_tensor(copy, "F32")
    begin, end = entry["data_offsets"]
    old = f'"{name}":{{"dtype":"F32","shape":{json.dumps(entry["shape"], separators=(",", ":"))},"data_offsets":'
    rewrite_header(copy / SHARD, lambda text: text.replace(f"{old}[{begin},{end}]", f"{old}[{begin + 1},{end + 1}]"))
    assert_bad_input(integrate("inspect", copy), SHARD, repr(name))


def test_a_shape_its_offsets_do_not_hold_is_refused(copy):
    name, entry = a_tensor(copy, "BF16")
    old = f'"{name}":{{"dtype":"BF16","shape":[{entry["shape"][0]}'
    rewrite_header(
        copy / SHARD, lambda text: text.replace(old, f'"{name}":{{"dtype":"BF16","shape":[{entry["shape"][0] * 2}')
    )
    assert_bad_input(integrate("inspect", copy), SHARD, repr(name), "needs")


def test_a_name_the_index_puts_in_another_shard_is_refused(copy):
    """Two tensors the index lists under each other's shard (per-file counts unchanged): the index and the headers
    disagree, named."""
    here, _ = a_tensor(copy, "U8")
    there, _ = a_tensor(copy, "U8", shard_name(41, 96))
    edit_index(copy, lambda weight_map: weight_map.update({here: shard_name(41, 96), there: SHARD}))
    result = integrate("inspect", copy)
    assert_bad_input(result, INDEX_NAME)
    assert repr(here) in result.err or repr(there) in result.err


def inspect_json(root: Path, code: int) -> dict:
    result = integrate("inspect", root, "--json")
    assert result.code == code, (result.code, result.err)
    assert "Traceback" not in result.err
    return json.loads(result.out)
