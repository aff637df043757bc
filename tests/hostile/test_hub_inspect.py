"""`integrate inspect owner/name` against a Hub endpoint that fails or answers nonsense: one line, exit 2, no token.
huggingface_hub reads HF_ENDPOINT at import, hence a subprocess per case; HF_HOME is private to the test (the Hub
client caches what the endpoint serves there)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from echo_server import EchoServer

HF_TOKEN = "hf_DAYONEhub_0a9f_never_print_me"


@pytest.mark.parametrize(("mode", "fragment"), [("json-401", "HTTP 401"), ("list-200", "could not be read")])
def test_hub_errors_are_one_line(tmp_path, mode, fragment):
    with EchoServer(mode) as hub:
        env = {
            **os.environ,
            "HF_ENDPOINT": hub.url,
            "HF_HOME": str(tmp_path / "home"),
            "HF_HUB_CACHE": str(tmp_path / "cache"),
            "HF_HUB_OFFLINE": "0",
            "HF_TOKEN": HF_TOKEN,
        }
        proc = subprocess.run(
            [sys.executable, "-P", "-m", "dayone", "inspect", "acme/model"],
            env=env,
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
        )
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and fragment in lines[0], proc.stderr
    assert HF_TOKEN not in proc.stdout + proc.stderr
