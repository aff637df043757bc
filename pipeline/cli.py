"""`integrate`: the command line. Each command lives in dayone/commands/<name>_cmd.py and exports COMMAND; this
file finds them (importing only the one that runs, so `inspect` never pays for github3 or torch) and turns bad
input into one line on stderr with exit code 2."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import click
from dayone.errors import InputError
from dayone.redact import redact, redact_streams, redacting_streams, remember_command_line

COMMANDS_DIR = Path(__file__).parent / "commands"


class Integrate(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(p.stem.removesuffix("_cmd") for p in COMMANDS_DIR.glob("*_cmd.py"))

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if not (COMMANDS_DIR / f"{name}_cmd.py").is_file():
            return None
        return importlib.import_module(f"dayone.commands.{name}_cmd").COMMAND

    def invoke(self, ctx: click.Context):
        try:
            with redacting_streams():
                return super().invoke(ctx)
        except InputError as err:
            click.echo(f"error: {redact(str(err))}", err=True)
            sys.exit(InputError.exit_code)
        except KeyboardInterrupt:
            click.echo("interrupted", err=True)
            sys.exit(130)


@click.group(cls=Integrate, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="dayone")
def cli() -> None:
    """dayone: day-one integration of new open-weight LLMs (spec, checkpoint, kernels, adapters, numerics, release)."""


def main() -> None:
    remember_command_line(sys.argv[1:])  # a token given as an option is a secret like GITHUB_TOKEN
    redact_streams()  # for the whole process: no secret in any output, tracebacks included
    cli(prog_name="integrate")
