"""`integrate`: the command line. Each command lives in dayone/commands/<name>_cmd.py and exports COMMAND; this
file finds them (importing only the one that runs, so `inspect` never pays for github3 or torch) and turns bad
input into one line on stderr with exit code 2.

`integrate --help` imports no command at all: the listing comes from SUMMARIES, which tests/cli keeps equal to
each command's own first docstring line. Scripts and CI run many short commands; each pays this start-up.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import click
from dayone.core.errors import InputError, environment_errors_as_input
from dayone.core.huge_pages import prefer_huge_pages
from dayone.core.redact import redact, redact_streams, redacting_streams, remember_command_line

COMMANDS_DIR = Path(__file__).parent / "commands"

# The first line of each command's help, for the `--help` listing (importing 14 command modules to read their
# docstrings would cost more than the rest of the start-up).
SUMMARIES = {
    "compile": "Compile every kernel specialisation SPEC needs, for each arch, without a GPU.",
    "conform": "Judge the generated SGLang / vLLM adapters in the pinned frameworks themselves, at each world size.",
    "convert": "Convert checkpoints between storage formats.",
    "dashboard": "Build the dashboard from REPORTS (report files, `inspect --json` files, or folders of them).",
    "generate": "Generate SGLang / vLLM / Miles / Megatron-Bridge code for a model. Exit 1 when --check finds "
    "problems.",
    "golden": "Write input_ids, fp32 logits and log-probs of CHECKPOINT (TIER, streamed layer by layer) to OUTPUT.",
    "inspect": "Inspect a checkpoint (folder or HF repo id[@revision]) against its spec.",
    "package": "Package the adapters `integrate generate` wrote under OUTDIR (OUTDIR/<target>/) into DIST.",
    "plan": "Parameters, bytes, per-request state, memory left and the batch-1 decode bound.",
    "prune": "Write a pruned copy of SRC: the chosen layers renumbered 0..n-1, the first E experts, a rewritten "
    "config.",
    "publish": "Publish the files in DIST as assets of the GitHub release TAG.",
    "run": "Resolve, inspect, plan, generate, compile, validate, package (and publish) CHECKPOINT; write "
    "OUT/report.json",
    "spec": "Model specs: the shipped ones, and those derived from an HF config.json.",
    "synth": "Write a synthetic checkpoint of SPEC in the release's format (names, dtypes, shards, config.json).",
    "validate": "Validate CHECKPOINT's numbers: CANDIDATE tier vs REFERENCE on fixed token sequences (teacher "
    "forcing).",
}


class Integrate(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(p.stem.removesuffix("_cmd") for p in COMMANDS_DIR.glob("*_cmd.py"))

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if not (COMMANDS_DIR / f"{name}_cmd.py").is_file():
            return None
        return importlib.import_module(f"dayone.commands.{name}_cmd").COMMAND

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The command listing from SUMMARIES; a command missing there (a new one) is imported for its help."""
        names = self.list_commands(ctx)
        if not names:
            return
        limit = formatter.width - 6 - max(map(len, names))
        rows = []
        for name in names:
            summary = SUMMARIES.get(name)
            if summary is None:
                command = self.get_command(ctx, name)
                summary = command.get_short_help_str(limit) if command else ""
            rows.append((name, click.utils.make_default_short_help(summary, limit)))
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def invoke(self, ctx: click.Context):
        # A --json command prints exactly one JSON document on stdout, on bad input too (scripts parse stdout).
        as_json = "--json" in sys.argv[1:]
        try:
            with redacting_streams(), environment_errors_as_input():
                return super().invoke(ctx)
        except InputError as err:
            from dayone.present import emit_json, error_document, plain  # rich: only when there is something to say

            message = plain(redact(str(err)))
            click.echo(f"error: {message}", err=True)
            if as_json:
                emit_json(error_document(message, InputError.exit_code))
            sys.exit(InputError.exit_code)
        except click.UsageError as err:
            if as_json:
                from dayone.present import emit_json, error_document, plain

                emit_json(error_document(plain(redact(err.format_message())), err.exit_code))
            raise
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
    prefer_huge_pages()  # before torch allocates, here and in the engines and trainers it starts
    cli(prog_name="integrate")
