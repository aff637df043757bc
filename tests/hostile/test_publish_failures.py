"""`integrate publish` against servers that fail in every way, echoing the request headers (the token) back.

Each failure is one line on stderr and exit 1 (the remote side) or 2 (our input); no token shows up on stdout,
stderr, in the --report file, or in the dashboard built from that report. Commands run in-process (click's runner):
the same Integrate.invoke as `integrate`, without a Python start per case.
"""

from __future__ import annotations

import socket
import time

import pytest
from click.testing import CliRunner
from dayone.cli import cli
from dayone.core.redact import MASK, redact, remember
from dayone.release import github
from echo_server import EchoServer
from release.fake_github import FakeGitHub

TOKEN = "ghp_DAYONEhostile_5e1d_never_print_me"
HF_TOKEN = "hf_DAYONEhostile_77c2_never_print_me"
ENV = {"GITHUB_TOKEN": TOKEN, "HF_TOKEN": HF_TOKEN}

# mode -> exit code. 401/404 are our input (the token, --repo); everything else the server's side.
MODES = {
    "json-401": 2,
    "json-403": 1,
    "json-404": 2,
    "json-422": 1,
    "json-500": 1,
    "text-500": 1,
    "text-502": 1,
    "json-503": 1,
    "html-200": 1,
    "list-200": 1,
    "hang": 1,
    "close": 1,
}


@pytest.fixture(autouse=True)
def quick_network(monkeypatch):
    """Retries and timeouts as shipped, only shorter: the test measures their bounds, not the wall clock."""
    monkeypatch.setattr(github, "BACKOFF_S", 0.01)
    monkeypatch.setattr(github, "READ_TIMEOUT_S", 0.3)
    monkeypatch.setattr(github, "CONNECT_TIMEOUT_S", 0.3)


def run(args, env=ENV):
    result = CliRunner().invoke(cli, [str(a) for a in args], env=env)
    return result.exit_code, result.stdout, result.stderr


def publish(dist, api_url, report):
    args = ["publish", dist, "--repo", "acme/kimi", "--tag", "v1", "--api-url", api_url]
    return run([*args, "--report", report, "--spec", "kimi-k3"])


def assert_failure(code, out, err, expected, *texts):
    assert code == expected, (code, out, err)
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert "Traceback" not in out + err
    for text in (out, err, *texts):
        assert TOKEN not in text and HF_TOKEN not in text


@pytest.mark.parametrize("mode", MODES)
def test_every_error_mode_is_one_line_and_leaks_no_token(dist, tmp_path, mode):
    report = tmp_path / "report.json"
    with EchoServer(mode) as server:
        start = time.monotonic()
        code, out, err = publish(dist, server.url, report)
        elapsed = time.monotonic() - start
        requests = list(server.requests)
    report_text = report.read_text() if report.exists() else ""
    assert_failure(code, out, err, MODES[mode], report_text)
    if code == 1:
        assert '"status": "fail"' in report_text
    if mode in ("json-500", "text-502", "json-503"):
        # reads are retried on 5xx, a bounded number of times, and Retry-After: 3600 is not obeyed
        assert len(requests) == github.RETRIES + 1, requests
    if mode == "hang":  # a timeout is not retried (issue 25 item 6): each try would wait as long again
        assert len(requests) == 1, requests
    assert elapsed < 10


def test_the_dashboard_built_from_failed_reports_shows_no_token(dist, tmp_path):
    reports = tmp_path / "reports"
    reports.mkdir()
    for mode in ("json-422", "text-500"):
        with EchoServer(mode) as server:
            publish(dist, server.url, reports / f"{mode}.json")
    # A report written before redaction existed, or by another tool, with the token in it:
    leaked = (reports / "json-422.json").read_text().replace('"status": "fail"', f'"status": "fail", "x": "{TOKEN}"')
    (reports / "old.json").write_text(leaked.replace('"details": {', f'"details": {{"echo": "{TOKEN}", ', 1))
    code, out, err = run(["dashboard", reports, "-o", tmp_path / "site"])
    site = "".join(p.read_text() for p in (tmp_path / "site").rglob("*") if p.is_file())
    for text in (out, err, site):
        assert TOKEN not in text
    assert code in (0, 2), err


def test_connection_refused_dns_tls_and_malformed_urls(dist, tmp_path, monkeypatch):
    report = tmp_path / "r.json"
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        refused = f"http://127.0.0.1:{s.getsockname()[1]}"
    code, out, err = publish(dist, refused, report)
    assert_failure(code, out, err, 1)
    assert "cannot connect" in err

    real_getaddrinfo = socket.getaddrinfo

    def no_dns(host, *args, **kwargs):
        if str(host).endswith(".invalid"):
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return real_getaddrinfo(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", no_dns)
    code, out, err = publish(dist, "https://github.dayone-test.invalid", report)
    assert_failure(code, out, err, 1)
    assert "resolve" in err

    with EchoServer("json-200") as server:  # TLS spoken to a plain-HTTP server
        code, out, err = publish(dist, server.url.replace("http://", "https://"), report)
    assert_failure(code, out, err, 1)
    assert "TLS" in err

    for bad in ("not a url", "ftp://example.com", "http://", "http://[::1", "http://host:99999", "https:///x"):
        code, out, err = publish(dist, bad, report)
        assert_failure(code, out, err, 2)
        assert "--api-url" in err


def test_hub_failures_are_one_line_and_leak_no_token(dist, tmp_path, monkeypatch):
    from huggingface_hub import constants

    # the Hub client caches what its endpoint serves under HF_HOME: keep that inside the test
    monkeypatch.setattr(constants, "AGENT_HARNESSES_PATH", str(tmp_path / "agent_harnesses.json"), raising=False)
    card = tmp_path / "card"
    card.mkdir()
    (card / "README.md").write_text("# card\n")
    for mode, fragment in (("json-401", "HTTP 401"), ("json-500", "HTTP 500"), ("close", "cannot reach")):
        with EchoServer(mode) as hub, FakeGitHub("acme", "kimi") as gh:
            monkeypatch.setattr(constants, "ENDPOINT", hub.url)
            args = ["publish", dist, "--repo", "acme/kimi", "--tag", "v1", "--api-url", gh.url]
            code, out, err = run([*args, "--hf-repo", "acme/kimi", "--hf-folder", card])
        assert code == 1, (mode, out, err)
        assert TOKEN not in out + err and HF_TOKEN not in out + err
        assert err.strip().splitlines()[-1].startswith("error: --hf-repo acme/kimi: ") and fragment in err


def test_redact_knows_every_form_of_every_secret(monkeypatch):
    import base64

    monkeypatch.setenv("HF_TOKEN", HF_TOKEN)
    remember("cli-given-secret-123")
    basic = base64.b64encode(f"x-access-token:{HF_TOKEN}".encode()).decode()
    text = f"a {HF_TOKEN} b cli-given-secret-123 c Basic {basic} d"
    assert redact(text) == f"a {MASK} b {MASK} c Basic {MASK} d"
    assert redact("no secrets here") == "no secrets here"


def test_a_traceback_printed_after_the_command_is_redacted_too():
    import os
    import subprocess
    import sys

    code = "from dayone.core.redact import redact_streams; redact_streams(); import os; raise RuntimeError(os.environ['GITHUB_TOKEN'])"
    proc = subprocess.run(
        [sys.executable, "-P", "-c", code], env={**os.environ, **ENV}, capture_output=True, text=True, check=False
    )
    assert "RuntimeError: ***" in proc.stderr and TOKEN not in proc.stderr


@pytest.mark.parametrize("mode", ["json-200", "list-200", "html-200", "json-500", "close"])
def test_a_package_index_answering_nonsense_is_one_error(tmp_path, monkeypatch, mode):
    """The static checks fetch an sdist listing from a package index (DAYONE_INDEX_URL): remote JSON like any other."""
    from dayone.adapters import pins
    from dayone.checks import releases
    from dayone.core.errors import InputError

    with EchoServer(mode) as index:
        monkeypatch.setenv("DAYONE_INDEX_URL", index.url)
        with pytest.raises(InputError) as err:
            releases._download_sdist(pins.Release("vllm", "0.33.0", "sdist", ("vllm",)), tmp_path)
    assert "\n" not in str(err.value) and str(err.value).startswith("vllm-0.33.0: ")


def test_tokens_given_as_options_are_secrets_too():
    from dayone.core.redact import remember_command_line

    remember_command_line(["publish", "--hf-token", "tok-from-argv-1", "--api-key=key-from-argv-2", "--tokens", "1,2"])
    assert redact("a tok-from-argv-1 b key-from-argv-2 c 1,2") == f"a {MASK} b {MASK} c 1,2"
