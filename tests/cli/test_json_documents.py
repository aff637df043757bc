"""Every command's `--json`: exactly one JSON document on stdout, on success, on a finding (exit 1) and on bad input
(exit 2), with the top-level keys docs/json-output.md promises. The schema is read from that page, so the page and
the commands cannot drift apart unnoticed: a command with a `--json` option and no row there fails here."""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import click
import pytest
from checkpoints import synthesize
from cli_runner import integrate

ROOT = Path(__file__).resolve().parents[2]
SCHEMA_PAGE = ROOT / "docs" / "json-output.md"
_IDENTIFIER = re.compile(r"`([a-z_]+)`")


def _without_parentheses(text: str) -> str:
    """`text` without its parenthesised parts (which describe nested fields, not top-level keys)."""
    depth, kept = 0, []
    for char in text:
        depth += char == "("
        if depth == 0:
            kept.append(char)
        depth -= char == ")" and depth > 0
    return "".join(kept)


@dataclass(frozen=True)
class Row:
    command: str
    is_list: bool
    keys: frozenset[str]


def documented() -> dict[str, Row]:
    """The Results table of docs/json-output.md: command -> its row."""
    text = SCHEMA_PAGE.read_text().split("## Results", 1)[1]
    rows = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3 or not cells[0].startswith("`"):
            continue
        command = cells[0].strip("`")
        keys = frozenset(_IDENTIFIER.findall(_without_parentheses(cells[2])))
        rows[command] = Row(command, cells[2].startswith("a list"), keys)
    return rows


def commands_with_json() -> set[str]:
    """Every (sub)command whose options include --json, found by walking the CLI itself."""
    from dayone.cli import cli

    context = click.Context(cli)
    found = set()
    for name in cli.list_commands(context):
        command = cli.get_command(context, name)
        subcommands = command.commands.items() if isinstance(command, click.Group) else [(None, command)]
        for sub, leaf in subcommands:
            if any("--json" in p.opts for p in leaf.params if isinstance(p, click.Option)):
                found.add(f"{name} {sub}" if sub else name)
    return found


# Bad input for each command: a missing file or an unknown name. Every one must print the error document.
BAD_INPUT = {
    "spec list": ("spec", "list", "--unknown-option"),
    "spec show": ("spec", "show", "nosuch"),
    "spec derive": ("spec", "derive", "/nonexistent/config.json", "-o", "x.yaml"),
    "inspect": ("inspect", "/nonexistent"),
    "plan": ("plan", "nosuch"),
    "generate": ("generate", "nosuch", "-o", "gen"),
    "conform": ("conform", "/nonexistent", "/nonexistent"),
    "validate": ("validate", "/nonexistent"),
    "compile": ("compile", "nosuch", "--arch", "sm_90", "-o", "k"),
    "publish": ("publish", "/nonexistent", "--repo", "o/n", "--tag", "v1", "--dry-run"),
    "package": ("package", "/nonexistent", "-o", "dist"),
    "dashboard": ("dashboard", "/nonexistent", "-o", "site"),
    "run": ("run", "/nonexistent", "-o", "out"),
    "convert mxfp4-to-bf16": ("convert", "mxfp4-to-bf16", "/nonexistent", "-o", "bf16"),
    "prune": ("prune", "/nonexistent", "-o", "pruned", "--layers", "0-1"),
}
BAD_INPUT_EXTRA = [  # a second kind of bad input where a command has one worth checking
    ("plan", ("plan", "kimi-k3", "--gpu", "tpu")),
    ("validate", ("validate", "/nonexistent", "--report", "r.json")),
]


def test_every_json_command_has_a_schema_row_and_is_checked():
    """One list of commands: the CLI's --json options, the page's rows, and the cases below."""
    commands = commands_with_json()
    assert "validate" in commands and "spec show" in commands
    assert set(documented()) == commands
    assert set(BAD_INPUT) == commands
    assert set(SUCCESS) == commands


@pytest.mark.parametrize("command, args", [*BAD_INPUT.items(), *BAD_INPUT_EXTRA], ids=lambda v: str(v))
def test_json_on_bad_input_prints_one_error_document(command, args, tmp_path):
    result = integrate(*args, "--json", cwd=tmp_path)
    assert result.code == 2, result.err
    doc = json.loads(result.out)  # exactly one document: json.loads refuses trailing text
    assert doc == {"ok": False, "error": doc["error"], "exit_code": 2} and doc["error"]
    assert doc["error"] in result.err  # the same line stderr shows
    assert "Traceback" not in result.err
    assert not (tmp_path / "r.json").exists()  # nothing written


@dataclass
class Made:
    """What the success cases read: a tiny K3 checkpoint (4 layers), its generated adapters, a validate report."""

    root: Path
    checkpoint: Path
    generated: Path
    generate_result: object
    report: Path


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> Made:
    root = tmp_path_factory.mktemp("json-documents")
    checkpoint = root / "ck"
    synthesize(checkpoint, "kimi-k3", "--scale", "tiny", "--layers", "4", "--shards", "1")
    generate = integrate("generate", checkpoint, "-o", root / "gen", "--target", "sglang", "--target", "vllm", "--json")
    report = root / "validate.json"
    validate = integrate("validate", checkpoint, "--tokens", "1,2,3,4", "--no-reload-check", "--report", report)
    assert validate.code == 0, validate.err
    return Made(root, checkpoint, root / "gen", generate, report)


def _module(path: Path):
    """The helper module at `path` (tests/release's fake GitHub), imported under its file name."""
    if path.stem not in sys.modules:
        spec = importlib.util.spec_from_file_location(path.stem, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[path.stem] = module  # before running it: its dataclasses look their module up
        spec.loader.exec_module(module)
    return sys.modules[path.stem]


def _publish_dry_run(made: Made, tmp_path: Path):
    fake_github = _module(ROOT / "tests" / "release" / "fake_github.py")
    dist = tmp_path / "dist"
    dist.mkdir()
    (dist / "SHA256SUMS").write_text("0" * 64 + "  x.whl\n")
    with fake_github.FakeGitHub("acme", "kimi") as server:
        args = ("publish", dist, "--repo", "acme/kimi", "--tag", "v0.1.0", "--api-url", server.url, "--dry-run")
        return integrate(*args, "--json", env={"GITHUB_TOKEN": ""})


SPEC_AND_PLAN_ONLY = [
    a for stage in ("coverage", "generate", "conform", "compile", "validate", "package") for a in ("--skip", stage)
]
# command -> (arguments for a run that works, the exit code it must end with). A callable builds arguments that
# need the fixture or a tmp_path; `conform` runs with no peer installed: it must say so, never "ok".
SUCCESS = {
    "spec list": (lambda made, tmp: ("spec", "list"), 0),
    "spec show": (lambda made, tmp: ("spec", "show", "kimi-k3"), 0),
    "spec derive": (lambda made, tmp: ("spec", "derive", made.checkpoint / "config.json", "-o", tmp / "s.yaml"), 0),
    "inspect": (lambda made, tmp: ("inspect", made.checkpoint), 0),
    "plan": (lambda made, tmp: ("plan", "kimi-k3", "--gpu", "h200", "--gpus", "16"), 0),
    "generate": (None, 0),  # the fixture's own generate --json
    "conform": (lambda made, tmp: ("conform", made.generated, made.checkpoint, "--world-size", "1"), 1),
    "compile": (None, 0),  # the session's K3 build (tests/cli/conftest.py), run again: every kernel cached
    "validate": (lambda made, tmp: ("validate", made.checkpoint, "--tokens", "1,2,3,4", "--no-reload-check"), 0),
    "package": (lambda made, tmp: ("package", made.generated, "-o", tmp / "dist"), 0),
    "publish": (None, 0),  # against the fake GitHub of tests/release
    "dashboard": (lambda made, tmp: ("dashboard", made.report, "-o", tmp / "site"), 0),
    "run": (lambda made, tmp: ("run", made.checkpoint, "-o", tmp / "out", *SPEC_AND_PLAN_ONLY), 0),
    "convert mxfp4-to-bf16": (lambda made, tmp: ("convert", "mxfp4-to-bf16", made.checkpoint, "-o", tmp / "bf16"), 0),
    "prune": (lambda made, tmp: ("prune", made.checkpoint, "-o", tmp / "pruned", "--layers", "0-1"), 0),
}


@pytest.mark.parametrize("command", list(SUCCESS))
def test_json_result_is_one_document_with_the_documented_keys(command, made, tmp_path, request):
    build, exit_code = SUCCESS[command]
    if command == "generate":
        result = made.generate_result
    elif command == "compile":
        k3_build = request.getfixturevalue("k3_build")
        result = integrate(*k3_build.args, "--json")
    elif command == "publish":
        result = _publish_dry_run(made, tmp_path)
    else:
        peers = {"DAYONE_PEERS": str(tmp_path / "no-peers")}  # conform: no peer environment installed here
        result = integrate(*build(made, tmp_path), "--json", env=peers, cwd=tmp_path)
    assert result.code == exit_code, result.err
    doc = json.loads(result.out)  # exactly one document, nothing else on stdout
    row = documented()[command]
    items = doc if row.is_list else [doc]
    assert isinstance(doc, list) == row.is_list and items
    for item in items:
        missing = row.keys - set(item)
        assert not missing, f"{command} --json lacks {sorted(missing)} (docs/json-output.md)"
        assert "exit_code" not in item  # a result, not an error document
    if command == "conform":  # nothing ran: not ok, and every level says which peer is missing and how to install it
        assert doc["ok"] is False
        for target in doc["targets"]:
            for run in target["runs"]:
                for level in run["levels"].values():
                    assert level["status"] == "not run"
                    assert f"the {target['target']} peer environment is not installed" in level["detail"]
                    assert "bash .ci/setup" in level["detail"]
    if command == "validate":  # the same report --report writes
        saved = json.loads(made.report.read_text())
        assert doc["status"] == saved["status"] == "pass" and doc["spec"] == saved["spec"]
        assert [r["capture"] for r in doc["details"]["numerics"]] == [
            r["capture"] for r in saved["details"]["numerics"]
        ]
