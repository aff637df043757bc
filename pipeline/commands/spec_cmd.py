"""`integrate spec list|show|derive|schema`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import click
from dayone.core.atomic import write_atomic
from dayone.present import console, emit_json, human_count, shown

if TYPE_CHECKING:
    from dayone.spec.schema import ModelSpec

# Each subcommand imports what it uses: `spec list` is run by scripts and must start fast.


@click.group()
def spec() -> None:
    """Model specs: the shipped ones, and those derived from an HF config.json."""


@spec.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def list_cmd(as_json: bool) -> None:
    """List the shipped specs."""
    from dayone.spec.registry import shipped_summaries
    from rich.table import Table

    rows = shipped_summaries()
    if as_json:
        emit_json(rows)
        return
    table = Table("name", "architecture", "layers")
    for r in rows:
        table.add_row(shown(r["name"]), shown(r["architecture"]), shown(r["num_layers"]))
    console.print(table)


def summarize(s: ModelSpec) -> dict:
    from dayone.spec.layout import to_expression
    from dayone.spec.manifest import build_manifest
    from dayone.spec.params import count_params

    counts = count_params(s, build_manifest(s))
    return {
        "name": s.name,
        "architecture": s.hf.architecture,
        "num_layers": s.num_layers,
        "attention_layout": to_expression(s.attention_kinds),
        "ffn_layout": to_expression(s.ffn_kinds),
        "layers": [
            {"index": l.index, "attention": l.attention, "ffn": l.ffn, "snapshot": l.snapshot} for l in s.layers
        ],
        "params": {
            "total": counts.total,
            "activated": counts.activated,
            "language": counts.language,
            "passthrough": counts.passthrough,
        },
        "spec": s.model_dump(mode="json"),
    }


@spec.command("show")
@click.argument("name_or_file")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def show(name_or_file: str, as_json: bool) -> None:
    """Show a spec: layer table, parameters, every field."""
    from dayone.spec.registry import load_spec, spec_to_yaml

    s = load_spec(name_or_file)
    summary = summarize(s)
    if as_json:
        emit_json(summary)
        return
    p = summary["params"]
    console.print(
        f"[bold]{shown(s.name)}[/] ({shown(s.hf.architecture)}): {s.num_layers} layers, "
        f"{human_count(p['total'])} parameters, {human_count(p['activated'])} activated per token"
    )
    console.print(
        f"  attention: {shown(summary['attention_layout'])}   "
        f"({s.attention_kinds.count('kda')} kda, {s.attention_kinds.count('mla')} mla)"
    )
    console.print(f"  ffn:       {shown(summary['ffn_layout'])}")
    if s.residual.kind == "attention":
        snaps = [l.index for l in s.layers if l.snapshot]
        console.print(f"  attention residuals: block {s.residual.block_size}, snapshots at layers {snaps}")
    for line in spec_to_yaml(s).splitlines():
        console.print(shown(line))


@spec.command("derive")
@click.argument("source")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), help="Write the YAML here.")
@click.option(
    "--name", help="Spec name (default: from the model, never the folder: <model type>-<size>, docs/adapters.md)."
)
@click.option(
    "--conventions",
    "conventions_dirs",
    multiple=True,
    type=click.Path(file_okay=False, exists=True, path_type=Path),
    help="A folder of conventions files (<model_type>.yaml), searched before $DAYONE_CONVENTIONS and the shipped.",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON: the spec and the conventions it was derived with.")
def derive(
    source: str, output: Path | None, name: str | None, conventions_dirs: tuple[Path, ...], as_json: bool
) -> None:
    """Derive a spec from an HF config.json or a checkpoint folder."""
    from dayone.checkpoint.reader import read_config
    from dayone.checkpoint.spec_source import named_after_the_model, spec_for_checkpoint
    from dayone.spec.derive import derive_spec
    from dayone.spec.family import conventions_for, searching
    from dayone.spec.registry import parse_spec, spec_to_dict, spec_to_yaml

    path = Path(source)
    with searching(conventions_dirs):
        if path.is_file():
            config = read_config(path)
            s = named_after_the_model(derive_spec(config, "derived", where=str(path)))
        else:  # a checkpoint folder, or an HF repo id[@revision] as `inspect` takes them
            from dayone.checkpoint.resolve import open_checkpoint

            s = spec_for_checkpoint(open_checkpoint(source), None)
        if name:  # validated as any spec's name is
            s = parse_spec(spec_to_dict(s) | {"name": name}, "--name")
        # The file the derivation used: `searching` looked it up once, so this names that file, not a new search's.
        used = conventions_for(s.hf.model_type, inline=s.conventions)
    text = spec_to_yaml(s)
    if output:
        write_atomic(output, text)
    if as_json:
        emit_json({"spec": spec_to_dict(s), "conventions": {"model_type": used.model_type, "source": used.source,
                   "extends": list(used.chain[1:])}, "output": str(output) if output else None})  # fmt: skip
    elif output:
        console.print(shown(f"wrote {output} (conventions: {used.source})"))
    else:
        click.echo(text, nl=False)
        click.echo(f"conventions: {used.source}", err=True)


@spec.command("schema")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), help="Write the schema here.")
def schema(output: Path | None) -> None:
    """Export the JSON schema of spec files (for editors)."""
    from dayone.spec.registry import json_schema

    text = json.dumps(json_schema(), indent=2) + "\n"
    if output:
        write_atomic(output, text)
    else:
        click.echo(text, nl=False)


COMMAND = spec
