"""`integrate --help` lists every command from a table instead of importing them: the table must say what each
command's own help says."""

import importlib

from cli_runner import integrate
from dayone.cli import SUMMARIES, Integrate


def test_the_summary_table_is_each_commands_own_first_help_line():
    names = Integrate().list_commands(None)
    assert sorted(SUMMARIES) == names
    for name in names:
        command = importlib.import_module(f"dayone.commands.{name}_cmd").COMMAND
        assert SUMMARIES[name] == command.help.split("\n")[0], f"update dayone.cli.SUMMARIES[{name!r}]"


def test_help_lists_every_command_with_its_summary():
    result = integrate("--help")
    assert result.code == 0
    rows = [line.split(None, 1) for line in result.out.split("Commands:")[1].splitlines() if line.strip()]
    assert [name for name, _ in rows] == Integrate().list_commands(None)
    for name, text in rows:  # click cuts long summaries at a word and appends "..."
        assert SUMMARIES[name].startswith(text.removesuffix("...")), (name, text)
