"""Issue 25 item 6: publish has a total deadline per request and per publish. A server that sends a status line
and then one byte every few seconds kept it waiting for ever (245 s before it was killed): every wait for a byte was
within the read timeout. Retries are for 5xx answers and resets only; a 403 or 404 says what it is.

The deadlines are shortened here (monkeypatched constants); each test asserts the wall-clock bound that the
deadline gives and fails without it (the dripping server would keep the publish for 500 s)."""

from __future__ import annotations

import time

import pytest
from click.testing import CliRunner
from dayone.cli import cli
from dayone.release import deadline, github
from echo_server import EchoServer

TOKEN = "ghp_DAYONEdeadline_91aa_never_print_me"


@pytest.fixture(autouse=True)
def short_bounds(monkeypatch):
    monkeypatch.setattr(github, "BACKOFF_S", 0.01)
    monkeypatch.setattr(github, "READ_TIMEOUT_S", 1.0)  # 20x the drip interval: never reached
    monkeypatch.setattr(github, "CONNECT_TIMEOUT_S", 1.0)
    monkeypatch.setattr(deadline, "REQUEST_DEADLINE_S", 1.5)
    monkeypatch.setattr(deadline, "PUBLISH_DEADLINE_S", 60.0)


def _publish(dist, url):
    args = ["publish", str(dist), "--repo", "acme/kimi", "--tag", "v1", "--api-url", url]
    start = time.monotonic()
    result = CliRunner().invoke(cli, args, env={"GITHUB_TOKEN": TOKEN})
    return result, time.monotonic() - start


def _one_line(result, code):
    assert result.exit_code == code, (result.exit_code, result.output, result.exception)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert TOKEN not in result.output and "Traceback" not in result.output
    return lines[0]


@pytest.mark.parametrize("mode", ["drip", "dripbody"])
def test_a_dripping_server_is_left_at_the_request_deadline(dist, mode):
    with EchoServer(mode) as server:
        result, elapsed = _publish(dist, server.url)
        tries = len(server.requests)
    line = _one_line(result, 1)
    assert "a request ran past its 1.5 s deadline" in line, line
    assert elapsed < 1.5 + 3, elapsed  # one request's deadline and start-up, no retry
    assert tries == 1


def test_the_publish_deadline_bounds_the_whole(dist, monkeypatch):
    monkeypatch.setattr(deadline, "REQUEST_DEADLINE_S", 30.0)
    monkeypatch.setattr(deadline, "PUBLISH_DEADLINE_S", 2.0)
    with EchoServer("drip") as server:
        result, elapsed = _publish(dist, server.url)
    line = _one_line(result, 1)
    assert "the publish ran past its 2 s deadline" in line, line
    assert elapsed < 2 + 3, elapsed


def test_a_streamed_download_stops_at_the_publish_deadline():
    clock = deadline.Deadline(0.0)
    sink = github._HashingSink("a.whl", clock)
    with pytest.raises(deadline.DeadlinePassed, match="the publish"):
        sink.write(b"x")


@pytest.mark.parametrize(("mode", "code", "fragment"), [
    ("json-403", 1, "forbidden (403)"),
    ("json-404", 2, "not found, or the token cannot see it (404)"),
])  # fmt: skip
def test_403_and_404_say_what_they_are(dist, mode, code, fragment):
    with EchoServer(mode) as server:
        result, _ = _publish(dist, server.url)
        tries = len(server.requests)
    line = _one_line(result, code)
    assert fragment in line and "offline" not in line, line
    assert tries == 1  # a refusal is not retried


def test_5xx_is_retried_with_backoff_and_a_timeout_is_not(dist):
    with EchoServer("json-503") as server:
        _publish(dist, server.url)
        assert len(server.requests) == github.RETRIES + 1
    with EchoServer("hang") as server:
        result, elapsed = _publish(dist, server.url)
        assert len(server.requests) == 1
    assert "did not answer within 1 s" in _one_line(result, 1)
    assert elapsed < 1 + 3


@pytest.mark.parametrize(("mode", "fragment"), [("json-403", "HTTP 403"), ("json-404", "404")])
def test_hub_refusals_when_inspecting_say_what_they_are(tmp_path, mode, fragment):
    import os
    import subprocess
    import sys

    with EchoServer(mode) as hub:
        env = {**os.environ, "HF_ENDPOINT": hub.url, "HF_HOME": str(tmp_path / "home"), "HF_HUB_OFFLINE": "0",
               "HF_HUB_CACHE": str(tmp_path / "cache")}  # fmt: skip
        proc = subprocess.run([sys.executable, "-P", "-m", "dayone", "inspect", "acme/model"], env=env, capture_output=True,
                              text=True, check=False, timeout=120)  # fmt: skip
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert fragment in lines[0] and "offline" not in lines[0], lines[0]
