"""How dayone shows things to people: the one rich console, --json documents on stdout, and byte / count figures
in human units. Commands print through it, and so do the domain modules that render a table (validate's report)
or a page (the dashboard), which is why it lives here and not in dayone.commands: domain code never imports a
command module. It imports nothing from dayone."""

from __future__ import annotations

import json

import click
from rich.console import Console

console = Console(highlight=False)


def emit_json(data: object) -> None:
    click.echo(json.dumps(data, indent=2, sort_keys=False))


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
