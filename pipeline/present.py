"""How dayone shows things to people: the one rich console, --json documents on stdout, and byte / count figures
in human units. Commands print through it, and so do the domain modules that render a table (validate's report)
or a page (the dashboard), which is why it lives here and not in dayone.commands: domain code never imports a
command module. It imports nothing from dayone.

Text that came from a user or a checkpoint (a spec name, a layout string, a tensor name, a tool's message) goes
through `shown` before it reaches the console: rich markup in it is printed as written ("[kda kda kda mla]" stays),
and control characters are written as escapes, so a name cannot recolour the terminal, ring it, or forge a line.
"""

from __future__ import annotations

import json
import re
import sys
import time

import click
from rich.console import Console
from rich.markup import escape

# Off a terminal (CI, `| tee`, a file) nothing is wrapped or cut: a line is as long as what it says. On a terminal
# rich fits the terminal's width.
UNWRAPPED = 1_000_000
console = Console(highlight=False, width=None if sys.stdout.isatty() else UNWRAPPED)
# C0 and C1 controls and DEL: ESC recolours, BEL rings, CR and LF forge lines. Tab is kept (it only moves).
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f]")


def plain(text: object) -> str:
    """`text` with every control character written as an escape (\\n, \\x1b): safe for any terminal or log line."""
    return _CONTROL.sub(_escape_control, str(text))


def shown(text: object) -> str:
    """`text` for console.print: control characters escaped (plain) and rich markup printed as written."""
    return escape(plain(text))


def _escape_control(match: re.Match) -> str:
    return match.group().encode("unicode_escape").decode("ascii")


def emit_json(data: object) -> None:
    """The one JSON document a --json command prints on stdout (success or error alike)."""
    click.echo(json.dumps(data, indent=2, sort_keys=False))


def error_document(message: str, exit_code: int) -> dict:
    """What a --json command prints on stdout when it stops on bad input (the same line goes to stderr)."""
    return {"ok": False, "error": message, "exit_code": exit_code}


def progress_line(text: str) -> None:
    """One timestamped progress line on stderr, flushed at once: what a run shows off a terminal (CI, a file)."""
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime())
    click.echo(f"{stamp}Z {plain(text)}", err=True)


def on_a_terminal() -> bool:
    """Whether progress is drawn (rich, on stderr's terminal) rather than written as lines."""
    return sys.stderr.isatty()


# Where a long stage's steps go (validate's layers, compile's kernels): off a terminal, a timestamped line each; a
# command drawing rich progress on a terminal points it at its progress bar; a --json run turns it off.
_step_sink = [None if on_a_terminal() else progress_line]


def step(text: str) -> None:
    """Report one step of a long piece of work ("validate: layer 3 of 93"). Domain code calls it; the command
    decides where it shows (set_step_sink)."""
    sink = _step_sink[0]
    if sink is not None:
        sink(text)


def set_step_sink(sink) -> None:
    """Send steps to `sink(text)`, or nowhere (None)."""
    _step_sink[0] = sink


def human_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(n) < 1000 or unit == "TB":
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.2f} {unit}"
        n /= 1000
    return f"{n}"


def human_count(n: float) -> str:
    for unit, scale in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if abs(n) >= scale:
            return f"{n / scale:.3g}{unit}"
    return str(n)
