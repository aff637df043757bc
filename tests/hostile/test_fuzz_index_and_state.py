"""Issue 25's fuzz of index maps and run state files: whatever the index's weight_map holds (any names, any file
names, entries added, dropped or moved between files), `inspect` exits 0, 1 or 2, prints one line for 2, never a
traceback and never a control character; whatever OUT/run.json or a stage.json holds, the run's state reader
answers "use it" or "start again, because ...", never raises."""

from __future__ import annotations

import json
import shutil
import unicodedata
from pathlib import Path

import pytest
from click.testing import CliRunner
from dayone.cli import cli
from dayone.run.state import read_state
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tiny_checkpoint import tiny_kimi_linear

INDEX = "model.safetensors.index.json"
ANY_TEXT = st.text(alphabet=st.characters(codec=None, exclude_categories=()), max_size=40)
FILE_NAMES = st.sampled_from(
    ["model-00001-of-00001.safetensors", "model-00002-of-00002.safetensors", "../x.safetensors", "/etc/passwd",
     "model\x00.safetensors", "a\\b.safetensors", "", "C:x", "sub/model.safetensors"]
) | ANY_TEXT  # fmt: skip
SETTINGS = settings(
    max_examples=300,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    return tiny_kimi_linear(tmp_path_factory, "index-fuzz", layers=2)


@st.composite
def edited_maps(draw, names: list[str]):
    """A weight_map edited by a handful of hostile changes."""
    weight_map = {name: "model-00001-of-00001.safetensors" for name in names}
    for _ in range(draw(st.integers(1, 4))):
        action = draw(st.sampled_from(["add", "drop", "move", "rename"]))
        name = draw(st.sampled_from(sorted(weight_map) or ["x"]))
        if action == "add":
            weight_map[draw(ANY_TEXT)] = draw(FILE_NAMES)
        elif action == "drop":
            weight_map.pop(name, None)
        elif action == "move":
            weight_map[name] = draw(FILE_NAMES)
        elif name in weight_map:
            weight_map[draw(ANY_TEXT)] = weight_map.pop(name)
    return weight_map


def _names(tiny: Path) -> list[str]:
    return sorted(json.loads((tiny / INDEX).read_text())["weight_map"])


@SETTINGS
@given(data=st.data())
def test_fuzz_index_maps(tiny, tmp_path_factory, data):
    root = tmp_path_factory.mktemp("ckpt") / "c"
    shutil.copytree(tiny, root)
    index = json.loads((root / INDEX).read_text())
    index["weight_map"] = data.draw(edited_maps(_names(tiny)), label="weight_map")
    (root / INDEX).write_text(json.dumps(index))
    result = CliRunner().invoke(cli, ["inspect", str(root)])
    assert isinstance(result.exception, SystemExit | None), repr(result.exception)
    assert result.exit_code in (0, 1, 2)
    if result.exit_code == 2:
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    printed = result.output.replace("\n", "")
    assert not any(unicodedata.category(ch) in ("Cc", "Cs") for ch in printed), repr(printed[-200:])


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | ANY_TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(ANY_TEXT, inner, max_size=3),
    max_leaves=8,
)
STATE_BYTES = (
    JSON_VALUES.map(lambda v: json.dumps(v).encode())
    | st.binary(max_size=64)
    | st.sampled_from([b"", b"{", b'{"created": "2026-01-01T00:00:00+00:00"', b"[" * 100_000, b"\xff\xfe{}"])
)


@SETTINGS
@given(raw=STATE_BYTES)
def test_fuzz_state_files(tmp_path_factory, raw):
    path = tmp_path_factory.mktemp("state") / "run.json"
    path.write_bytes(raw)
    data, problem = read_state(path)
    assert (data is None) != (problem is None)
    if data is not None:
        assert isinstance(data, dict)
    else:
        assert "\n" not in problem
