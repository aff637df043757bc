"""Issue 25 items 4 and 8: checkpoint-supplied names and the sizes of what the reader reads.

4. A tensor or file name with a NUL byte, over 255 characters, a lone surrogate, or ESC / BEL / a newline (which
   recoloured the terminal or forged an "ok" line) is refused where it is read: one line, exit 2, the name escaped.
8. A name given twice in a safetensors header (json.loads kept the last silently) is refused, naming it; config.json
   and the index are bounded in size before they are read, and neither is read through a link leading outside the
   checkpoint folder.

Every command runs in-process (click's runner: the same Integrate.invoke as `integrate`). The security tests look
for the raw control characters in everything printed: they fail when the reader's refusal is removed."""

from __future__ import annotations

import json
import shutil
import struct
import unicodedata
from pathlib import Path

import pytest
from click.testing import CliRunner
from dayone.checkpoint import names as checkpoint_names
from dayone.checkpoint.reader import MAX_CONFIG_BYTES, open_local
from dayone.checkpoint.safetensors_header import has_duplicates, read_header
from dayone.cli import cli
from dayone.core.errors import InputError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tiny_checkpoint import tiny_kimi_linear

RENAMED = "model.norm.weight"
INDEX = "model.safetensors.index.json"
TERMINAL_CONTROLS = ("\x1b", "\x07", "\x00", "\r")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    return tiny_kimi_linear(tmp_path_factory, "names", layers=2)


def _copy(tiny: Path, root: Path) -> Path:
    shutil.rmtree(root, ignore_errors=True)
    shutil.copytree(tiny, root)
    return root


def _shard(root: Path) -> Path:
    return next(root.glob("*.safetensors"))


def _edit_header_text(shard: Path, edit) -> None:
    raw = shard.read_bytes()
    (length,) = struct.unpack("<Q", raw[:8])
    text = edit(raw[8 : 8 + length].decode())
    data = text.encode("utf-8", "surrogatepass")
    shard.write_bytes(struct.pack("<Q", len(data)) + data + raw[8 + length :])


def _rename(root: Path, new: str, in_header: bool = True, in_index: bool = True) -> None:
    """RENAMED becomes `new`, written as json.dumps writes it (escaped), in the header and/or the index."""
    if in_header:

        def edit(text: str) -> str:
            header = json.loads(text)
            header[new] = header.pop(RENAMED)
            return json.dumps(header)

        _edit_header_text(_shard(root), edit)
    if in_index:
        index = json.loads((root / INDEX).read_text())
        index["weight_map"][new] = index["weight_map"].pop(RENAMED)
        (root / INDEX).write_text(json.dumps(index))


def _inspect(root: Path, *more: str):
    result = CliRunner().invoke(cli, ["inspect", str(root), *more])
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    return result, lines


def _assert_refused(result, lines, *fragments):
    assert result.exit_code == 2 and isinstance(result.exception, SystemExit), (result.output, result.exception)
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])


HOSTILE_NAMES = {
    "nul": "model.norm\x00.weight",
    "esc-colour": "model.norm.\x1b[32mweight",
    "bel": "model.norm.weight\x07",
    "forged-ok-line": "model.norm.weight\r\nok 151/151 tensors covered",
    "c1-csi": "model.norm.\x9bweight",
    "del": "model.norm.\x7fweight",
    "line-separator": "model.norm.\u2028weight",
    "lone-surrogate": "model.norm.\ud800weight",
    "over-255": "model.norm." + "w" * 300,
}


@pytest.mark.parametrize("where", ["header", "index", "both"])
@pytest.mark.parametrize("kind", HOSTILE_NAMES)
def test_a_name_no_writer_produces_is_one_line_and_nothing_raw_is_printed(tiny, tmp_path, kind, where):
    root = _copy(tiny, tmp_path / "ckpt")
    name = HOSTILE_NAMES[kind]
    _rename(root, name, in_header=where != "index", in_index=where != "header")
    result, lines = _inspect(root)
    assert result.exit_code in (1, 2) and isinstance(result.exception, SystemExit), (result.output, result.exception)
    printed = result.output
    for control in TERMINAL_CONTROLS:
        assert control not in printed.replace("\n", ""), (kind, printed[-300:])
    assert "\ud800" not in printed and "\x9b" not in printed and "\u2028" not in printed
    if where != "index":  # the header holds it: refused as the header is read
        _assert_refused(result, lines, _shard(root).name if where == "header" else "")


def test_a_forged_ok_line_does_not_reach_the_terminal(tiny, tmp_path):
    root = _copy(tiny, tmp_path / "ckpt")
    _rename(root, HOSTILE_NAMES["forged-ok-line"])
    result, lines = _inspect(root)
    _assert_refused(result, lines, "U+000D")
    assert not any(line.startswith("ok ") for line in result.output.splitlines())


def test_a_file_name_with_a_nul_in_the_index(tiny, tmp_path):
    root = _copy(tiny, tmp_path / "ckpt")
    index = json.loads((root / INDEX).read_text())
    index["weight_map"][RENAMED] = "model\x00-00001-of-00001.safetensors"
    (root / INDEX).write_text(json.dumps(index))
    result, lines = _inspect(root)
    _assert_refused(result, lines, "file name", "U+0000")


def test_a_name_given_twice_in_a_header_is_refused(tiny, tmp_path):
    root = _copy(tiny, tmp_path / "ckpt")

    def repeat(text: str) -> str:
        entry = json.dumps(json.loads(text)[RENAMED])
        return "{" + f'"{RENAMED}": {entry}, ' + text[1:]

    _edit_header_text(_shard(root), repeat)
    with pytest.raises(InputError, match=f"names '{RENAMED}' twice"):
        read_header(_shard(root))
    result, lines = _inspect(root)
    _assert_refused(result, lines, RENAMED, "twice")


def test_a_name_given_twice_spelled_with_escapes(tiny, tmp_path):
    root = _copy(tiny, tmp_path / "ckpt")
    escaped = RENAMED[:-1] + "\\u0074"  # the same name once decoded

    def repeat(text: str) -> str:
        entry = json.dumps(json.loads(text)[RENAMED]).replace("data_offsets", "data\\u005foffsets")
        return "{" + f'"{escaped}": {entry}, ' + text[1:]

    _edit_header_text(_shard(root), repeat)
    result, lines = _inspect(root)
    _assert_refused(result, lines, "twice")


def test_duplicate_detection_on_plain_headers():
    entry = {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}
    plain = json.dumps({"a": entry, "b": {**entry, "data_offsets": [4, 8]}}).encode()
    assert not has_duplicates(plain, json.loads(plain))
    twice = b'{"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4], "data_offsets": [0, 4]}}'
    assert has_duplicates(twice, json.loads(twice))
    # A name holding the quoted word cannot fake a count: its quotes are escaped in the text.
    named = json.dumps({'x"data_offsets"': entry}).encode()
    assert not has_duplicates(named, json.loads(named))


def test_a_huge_config_is_refused_unread(tiny, tmp_path):
    root = _copy(tiny, tmp_path / "ckpt")
    config = json.loads((root / "config.json").read_text())
    config["padding"] = "x" * (MAX_CONFIG_BYTES + 1)
    (root / "config.json").write_text(json.dumps(config))
    result, lines = _inspect(root)
    _assert_refused(result, lines, "config.json", "larger than 16 MiB")


def test_a_huge_index_is_refused_unread(tiny, tmp_path, monkeypatch):
    # The bound is 1 GiB; the test lowers it rather than write a gigabyte.
    monkeypatch.setattr("dayone.checkpoint.reader.MAX_INDEX_BYTES", 4096)
    root = _copy(tiny, tmp_path / "ckpt")
    assert (root / INDEX).stat().st_size > 4096
    with pytest.raises(InputError, match="refused unread"):
        open_local(root)


@pytest.mark.parametrize("name", ["config.json", INDEX])
def test_config_and_index_are_not_read_through_a_link_outside(tiny, tmp_path, name):
    root = _copy(tiny, tmp_path / "ckpt")
    outside = tmp_path / f"outside-{name}"
    (root / name).rename(outside)
    (root / name).symlink_to(outside)
    result, lines = _inspect(root)
    _assert_refused(result, lines, "outside the checkpoint folder", name)


def test_a_link_inside_the_folder_is_still_read(tiny, tmp_path):
    # Hugging Face's cache holds every file as a link into its blobs folder: links that stay inside are fine.
    root = _copy(tiny, tmp_path / "ckpt")
    (root / "blobs").mkdir()
    (root / "config.json").rename(root / "blobs" / "c")
    (root / "config.json").symlink_to(root / "blobs" / "c")
    result, _ = _inspect(root)
    assert result.exit_code == 0, result.output


# ---- fuzz: any name at all, in the header, the index or both

NAME_TEXT = st.text(
    alphabet=st.characters(codec=None, exclude_categories=()), min_size=1, max_size=300
) | st.sampled_from(list(HOSTILE_NAMES.values()))


@settings(
    max_examples=400,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(name=NAME_TEXT, where=st.sampled_from(["header", "index", "both"]))
def test_fuzz_any_name(tiny, tmp_path_factory, name, where):
    root = _copy(tiny, tmp_path_factory.mktemp("fuzz") / "ckpt")
    if name == RENAMED:
        return
    _rename(root, name, in_header=where != "index", in_index=where != "header")
    result, lines = _inspect(root)
    assert isinstance(result.exception, SystemExit | None), result.exception
    assert result.exit_code in (0, 1, 2)
    if result.exit_code == 2:
        assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    printed = result.output.replace("\n", "")
    assert not any(unicodedata.category(ch) in ("Cc", "Cs") for ch in printed), repr(printed[-200:])
    refused = any(unicodedata.category(ch) in ("Cc", "Cs") for ch in name) or len(name) > 255
    if refused and where != "index":
        assert result.exit_code == 2, (name, result.output)


def test_check_names_matches_check_name_one_by_one():
    names = ["a.weight", "b.\x1bweight", "c"]
    with pytest.raises(InputError, match="U\\+001B"):
        checkpoint_names.check_names(names, "f")
    checkpoint_names.check_names(["a.weight", "é.weight", "层.weight"], "f")
    with pytest.raises(InputError, match="empty"):
        checkpoint_names.check_names(["a", ""], "f")


@pytest.mark.parametrize("name", ["{", "}", "model.{0}.weight", "model.norm.{}"])
def test_a_name_with_braces_is_reported_as_written(tiny, tmp_path, name):
    # Found by test_fuzz_any_name: the report's name grouping formatted the name as a template (ValueError:
    # Single '{' encountered in format string).
    root = _copy(tiny, tmp_path / "ckpt")
    _rename(root, name)
    result, _ = _inspect(root)
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit), (result.output, result.exception)
    assert f"  {name}\n" in result.output
