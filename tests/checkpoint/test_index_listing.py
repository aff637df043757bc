"""The index read once for the scan's parent (dayone.checkpoint.scan.index.read_listing): each file's names sorted,
one a line, and whether no name is listed twice, checked against json.loads of the same text; anything it cannot
vouch for is None (the plain reader then parses the index and names what is wrong)."""

import json

import pytest
from dayone.checkpoint.scan import index as index_text
from dayone.checkpoint.scan.index import read_listing


def index_file(tmp_path, body: str):
    path = tmp_path / "model.safetensors.index.json"
    path.write_text('{\n  "metadata": {\n    "total_size": 1\n  },\n  "weight_map": {\n    ' + body + "\n  }\n}\n")
    return path


def pairs_text(pairs) -> str:
    return ",\n    ".join(f'"{name}": "{file}"' for name, file in pairs)


@pytest.mark.parametrize("chunk", [1 << 22, 40])  # one chunk, and a cut every few pairs
def test_names_per_file_as_json_reads_them(tmp_path, monkeypatch, chunk):
    monkeypatch.setattr(index_text, "_CHUNK", chunk)
    pairs = [
        (f"model.layers.{i}.w{j}", f"model-0000{(i * 7 + j) % 3 + 1}.safetensors") for i in range(40) for j in (0, 1)
    ]
    for order in (sorted(pairs), pairs[::-1]):
        path = index_file(tmp_path, pairs_text(order))
        listing = read_listing(path)
        weight_map = json.loads(path.read_text())["weight_map"]
        want = {}
        for name, file in weight_map.items():
            want.setdefault(file, []).append(name)
        assert listing.texts == {file: "\n".join(sorted(names)).encode() for file, names in want.items()}
        assert listing.keys_distinct


@pytest.mark.parametrize("order", ["sorted", "unsorted"])
def test_a_name_listed_twice_is_seen(tmp_path, order):
    pairs = [("a.w", "f1"), ("b.w", "f2"), ("c.w", "f1"), ("b.w", "f1")]
    pairs = sorted(pairs) if order == "sorted" else pairs
    assert read_listing(index_file(tmp_path, pairs_text(pairs))).keys_distinct is False


@pytest.mark.parametrize(
    "body",
    [
        '"a.w": "f1",\n    "b\nc": "f1"',  # a raw newline in a name: not JSON, and would pass for two names
        '"a.w": "f1" "b.w": "f1"',  # no comma
        '"a.w": "f1",\n    "b.w": 3',  # not a file name
        '"a.w": "f1",\n    "b\\"w": "f1"',  # an escape: a quote need not end a string
    ],
)
def test_what_it_cannot_vouch_for_is_left_to_the_plain_reader(tmp_path, body):
    assert read_listing(index_file(tmp_path, body)) is None
