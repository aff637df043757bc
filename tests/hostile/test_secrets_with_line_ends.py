"""Issue 25 item 1: a GITHUB_TOKEN with a trailing newline or CR/LF (`export GITHUB_TOKEN=$(cat token.txt)` of a
Windows file) made publish fail with a ValueError traceback quoting the token, and `run --publish` wrote it into 7
files under OUT. The token is stripped up front (one with a control character inside is refused without quoting it),
and the one redaction point knows every form it can take in text: raw, stripped, escaped as repr and JSON write it.

Each test here fails when the defence is removed: the server echoes the Authorization header back, the stage's
exception quotes the token escaped, and every byte written is searched for it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from dayone.cli import cli
from dayone.core import redact as redaction
from dayone.core.errors import InputError
from dayone.release import github
from dayone.run.outputs import StageOutput
from dayone.run.runner import FAIL, Stage, StageResult, run_stages
from echo_server import EchoServer

TOKEN = "ghp_DAYONEline_ends_0c4f_never_print_me"
LINE_ENDS = {"lf": TOKEN + "\n", "crlf": TOKEN + "\r\n", "cr": TOKEN + "\r", "spaces": f"  {TOKEN}\t\n"}


@pytest.fixture(autouse=True)
def quick_network(monkeypatch):
    monkeypatch.setattr(github, "BACKOFF_S", 0.01)
    monkeypatch.setattr(github, "READ_TIMEOUT_S", 0.3)
    monkeypatch.setattr(github, "CONNECT_TIMEOUT_S", 0.3)


def _everything_under(folder: Path) -> str:
    return "".join(p.read_bytes().decode("utf-8", "replace") for p in folder.rglob("*") if p.is_file())


@pytest.mark.parametrize("value", LINE_ENDS.values(), ids=LINE_ENDS.keys())
def test_publish_with_a_token_ending_in_a_line_end(tmp_path, value):
    dist = tmp_path / "dist"
    dist.mkdir()
    (dist / "a.whl").write_bytes(b"PK wheel")
    report = tmp_path / "report.json"
    with EchoServer("json-500") as server:
        args = ["publish", dist, "--repo", "acme/kimi", "--tag", "v1", "--api-url", server.url, "--report", report]
        args += ["--spec", "kimi-k3"]
        result = CliRunner().invoke(cli, [str(a) for a in args], env={"GITHUB_TOKEN": value})
    assert result.exit_code == 1, (result.exit_code, result.output)
    assert "Traceback" not in result.output and not isinstance(result.exception, ValueError | TypeError)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "GitHub API error 500" in lines[0], result.stderr
    # The request went out with the stripped token (the server saw it), and nothing shows it.
    assert server.requests, "no request reached the server"
    texts = [result.stdout, result.stderr, report.read_text() if report.exists() else ""]
    assert not any(TOKEN in text for text in texts)


def test_a_token_with_a_line_break_inside_is_refused_without_quoting_it(tmp_path):
    dist = tmp_path / "dist"
    dist.mkdir()
    (dist / "a.whl").write_bytes(b"PK wheel")
    inner = TOKEN[:10] + "\r\n" + TOKEN[10:]
    args = ["publish", str(dist), "--repo", "acme/kimi", "--tag", "v1", "--api-url", "http://127.0.0.1:9"]
    result = CliRunner().invoke(cli, args, env={"GITHUB_TOKEN": inner})
    assert result.exit_code == 2
    assert result.stderr.strip().startswith("error: GITHUB_TOKEN: ") and len(result.stderr.strip().splitlines()) == 1
    assert TOKEN[:10] not in result.output and TOKEN[10:] not in result.output


@pytest.mark.parametrize("value", LINE_ENDS.values(), ids=LINE_ENDS.keys())
def test_every_written_form_of_the_token_is_masked(monkeypatch, value):
    monkeypatch.setenv("GITHUB_TOKEN", value)
    forms = {
        "raw": value,
        "stripped": value.strip(),
        "repr": repr(f"token {value}"),  # what requests' ValueError and a traceback print
        "json": json.dumps({"summary": f"token {value}"}),  # a stage record
        "json, non-ASCII kept": json.dumps(f"ü {value}", ensure_ascii=False),
    }
    for what, text in forms.items():
        assert TOKEN not in redaction.redact(text), what


def test_clean_token():
    assert redaction.clean_token(TOKEN + "\r\n", "GITHUB_TOKEN") == TOKEN
    assert redaction.clean_token(" \n", "GITHUB_TOKEN") is None
    assert redaction.clean_token(None, "GITHUB_TOKEN") is None
    for inner in (TOKEN[:5] + " " + TOKEN[5:], TOKEN[:5] + "\x1b" + TOKEN[5:], TOKEN[:5] + "\x00" + TOKEN[5:]):
        with pytest.raises(InputError) as err:
            redaction.clean_token(inner, "GITHUB_TOKEN")
        assert TOKEN[:5] not in str(err.value)


def test_run_refuses_a_token_with_a_line_break_inside_before_any_stage(tmp_path):
    out = tmp_path / "out"
    args = ["run", "--demo", "--publish", "acme/kimi", "--tag", "v1", "-o", str(out)]
    result = CliRunner().invoke(cli, args, env={"GITHUB_TOKEN": TOKEN[:8] + "\n" + TOKEN[8:]})
    assert result.exit_code == 2 and "GITHUB_TOKEN" in result.stderr
    assert not (out / "stages").exists()


class Echo(StageOutput):
    """A stage's output that repeats what a server said."""

    echo: tuple[str, ...]


def test_a_stage_that_raises_quoting_the_token_leaves_it_in_no_file_under_out(tmp_path, monkeypatch):
    """What `run --publish` did with a CR/LF token: the publish stage's ValueError quoted the header (repr: the
    line end escaped) into stage.json, the traceback log, report.json and the site. The runner's one redaction
    point masks it in every form."""
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN + "\r\n")

    def publish_like_requests(workdir: Path, upstream: dict) -> StageResult:
        raise ValueError(f"Invalid return character or leading space in header: Authorization: {'token ' + TOKEN!r}")

    def says_the_token(workdir: Path, upstream: dict) -> StageResult:
        return StageResult(FAIL, f"server said: token {TOKEN}\r\n", Echo(echo=(f"Bearer {TOKEN}",)))

    for run in (publish_like_requests, says_the_token):
        run.__module__ = "dayone.run.runner"  # a stage's key digests its defining module, which must be dayone's
    stages = [Stage("publish", dict, publish_like_requests), Stage("echo", dict, says_the_token, output=Echo)]
    results = run_stages(stages, tmp_path, "test")
    assert results["publish"].status == FAIL and "ValueError" in results["publish"].summary
    assert TOKEN not in results["publish"].summary + results["echo"].summary
    written = _everything_under(tmp_path)
    assert "Invalid return character" in written  # the traceback log and stage.json were written
    assert TOKEN not in written
