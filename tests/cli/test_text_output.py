"""What the commands print says what it means: user and checkpoint text is shown as written (rich markup in it is
not applied) and can neither recolour the terminal, ring it, nor start a forged line."""

from __future__ import annotations

from checkpoints import synthesize
from cli_runner import PROGRESS, integrate
from dayone.present import plain, shown

HOSTILE = "x[bold]y[/]\x1b[31mred\x07\nok: covered"


def test_shown_escapes_control_characters_and_keeps_brackets():
    assert plain(HOSTILE) == "x[bold]y[/]\\x1b[31mred\\x07\\nok: covered"
    from rich.console import Console

    console = Console(width=200, highlight=False, color_system=None)
    with console.capture() as captured:
        console.print(shown(HOSTILE))
    assert captured.get() == "x[bold]y[/]\\x1b[31mred\\x07\\nok: covered\n"


def test_a_hostile_folder_name_is_printed_escaped(tmp_path):
    folder = tmp_path / HOSTILE.replace("/", "_")
    made = integrate("synth", "kimi-linear-48b-a3b", "--skeleton", "--shards", "1", "-o", folder)
    assert made.code == 0, made.err
    inspected = integrate("inspect", folder, "--spec", "kimi-linear-48b-a3b")
    assert inspected.code == 0, inspected.err
    for out in (made.out, inspected.out):
        assert "\x1b" not in out and "\x07" not in out
        assert "x[bold]y[_]\\x1b[31mred\\x07\\nok: covered" in out  # one line, brackets as written
        assert not any(line.startswith("ok: covered") for line in out.splitlines())


def test_validate_prints_a_hostile_checkpoint_name_escaped(tmp_path):
    """validate's report names the checkpoint as given, in a bold header: markup in the name is printed as written."""
    folder = tmp_path / HOSTILE.replace("/", "_")
    synthesize(folder, "kimi-k3", "--scale", "tiny", "--layers", "4", "--shards", "1")
    validated = integrate("validate", folder, "--tokens", "1,2,3,4", "--no-reload-check", env={"OMP_NUM_THREADS": "1"})
    assert validated.code == 0, validated.err
    assert "\x1b" not in validated.out and "\x07" not in validated.out
    header = validated.out.splitlines()[0]
    assert "x[bold]y[_]\\x1b[31mred\\x07\\nok: covered: fast tier vs naive" in header, header


def test_convert_names_the_side_files_it_copied_as_written(tmp_path):
    """A checkpoint's side files (tokenizer, chat template) keep their names: markup in one is printed as written."""
    source = tmp_path / "ck"
    synthesize(source, "kimi-k3", "--scale", "tiny", "--layers", "4", "--shards", "1")
    (source / "tokenizer[bold].json").write_text("{}")
    converted = integrate("convert", "mxfp4-to-bf16", source, "-o", tmp_path / "bf16")
    assert converted.code == 0, converted.err
    assert "tokenizer[bold].json" in converted.out, converted.out
    # off a terminal (as here) a timestamped line on stderr as each file starts: a release's files are GBs each
    said = [line.split(" ", 2)[2] for line in converted.err.splitlines() if PROGRESS.match(line)]
    assert said == ["convert: file 1 of 1: model-00001-of-00001.safetensors"]
