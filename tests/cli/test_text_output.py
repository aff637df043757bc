"""What the commands print says what it means: user and checkpoint text is shown as written (rich markup in it is
not applied) and can neither recolour the terminal, ring it, nor start a forged line."""

from __future__ import annotations

from cli_runner import integrate
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
