"""`integrate`: the command line. Each command lives in dayone/commands/<name>.py; this file only assembles them
and turns bad input into one line on stderr with exit code 2."""

from __future__ import annotations

import sys

import click
from dayone.errors import InputError


class Integrate(click.Group):
    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except InputError as err:
            click.echo(f"error: {err}", err=True)
            sys.exit(InputError.exit_code)
        except KeyboardInterrupt:
            click.echo("interrupted", err=True)
            sys.exit(130)


@click.group(cls=Integrate, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="dayone")
def cli() -> None:
    """dayone: day-one integration of new open-weight LLMs (spec, checkpoint, kernels, adapters, numerics, release)."""


def _register() -> None:
    from dayone.commands import compile_cmd, inspect_cmd, plan_cmd, spec_cmd, synth_cmd

    cli.add_command(compile_cmd.compile_cmd)
    cli.add_command(spec_cmd.spec)
    cli.add_command(inspect_cmd.inspect)
    cli.add_command(plan_cmd.plan)
    cli.add_command(synth_cmd.synth)
    from dayone.commands import publish_cmd

    cli.add_command(publish_cmd.publish)
    from dayone.commands import dashboard_cmd

    cli.add_command(dashboard_cmd.dashboard)


_register()


def main() -> None:
    cli(prog_name="integrate")
