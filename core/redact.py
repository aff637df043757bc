"""Secrets never leave the process in text: every message, log line, report and file dayone writes passes `redact`.

The process's secrets are the tokens in its environment (SECRET_VARIABLES, read at each call, so a token set after
start-up counts) and any given on the command line (`remember`). Text quoted from a server is redacted like
everything else: an API that echoes the request headers back in an error body would otherwise print the token.

Where it is applied: the CLI's stdout and stderr are wrapped for the whole process (`redact_streams`, which
covers rich tables, click messages, logging and tracebacks); `atomic.write_atomic` and the stage report model
redact what they write and read; the release clients redact server text before it goes into an exception.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import sys
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

from dayone.core.errors import InputError

SECRET_VARIABLES = ("GITHUB_TOKEN", "GH_TOKEN", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")
MASK = "***"
# Shorter values are not treated as secrets: masking every "abc" in the output would hide more than it protects.
MIN_SECRET_LENGTH = 6

_remembered: set[str] = set()


def remember(secret: str | None) -> None:
    """Treat `secret` (a token given on the command line, read from a file) as one of the process's secrets."""
    if secret:
        _remembered.add(secret)


def remember_command_line(args: list[str]) -> None:
    """Every value given to an option named like a secret (--token, --hf-token=..., --api-key, --password), except
    --tokens, which takes token ids."""
    for i, arg in enumerate(args):
        name, eq, value = arg.partition("=")
        if not name.startswith("--") or name == "--tokens":
            continue
        if any(word in name for word in ("token", "secret", "password", "api-key", "apikey")):
            remember(value if eq else (args[i + 1] if i + 1 < len(args) else None))


def secrets() -> list[str]:
    """Every secret the process holds, in the forms it can appear in text, longest first."""
    raw = {os.environ.get(name) or "" for name in SECRET_VARIABLES} | _remembered
    # A token pasted with a line end ("export GITHUB_TOKEN=$(cat token.txt)" of a Windows file) is sent, and so
    # quoted back, without it; an error quotes it escaped (repr in a traceback, JSON in a report).
    raw |= {secret.strip() for secret in raw}
    forms: set[str] = set()
    for secret in raw:
        if len(secret) < MIN_SECRET_LENGTH:
            continue
        # As sent in a URL, and in Basic auth headers (git's "x-access-token:TOKEN", base64 encoded).
        forms |= {secret, quote(secret, safe=""), base64.b64encode(secret.encode()).decode()}
        forms |= {repr(secret)[1:-1], json.dumps(secret)[1:-1], json.dumps(secret, ensure_ascii=False)[1:-1]}
        forms.add(base64.b64encode(f"x-access-token:{secret}".encode()).decode())
    return sorted(forms, key=len, reverse=True)


def clean_token(value: str | None, variable: str) -> str | None:
    """A token from the environment as it is to be sent: the white space around it (a pasted line end, CR/LF from a
    Windows file) stripped; one with a space or control character inside refused, without quoting it. Requests
    otherwise raised a ValueError quoting the whole header, token and all."""
    if value is None:
        return None
    token = value.strip()
    remember(value)  # the raw form (with its line end) is a secret too
    if not token:
        return None
    if any(ch.isspace() or not ch.isprintable() for ch in token):
        raise InputError(f"{variable}: holds a space or control character inside the token; set it to the token alone")
    return token


def redact(text: str) -> str:
    for secret in secrets():
        if secret in text:
            text = text.replace(secret, MASK)
    return text


def redact_data(value: Any) -> Any:
    """The same for JSON-like data (report details): every string in it, keys included."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {redact_data(k): redact_data(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(redact_data(v) for v in value)
    return value


def server_text(text: object, limit: int = 200) -> str:
    """Text a server sent, fit to quote in a one-line message: redacted, on one line, at most `limit` characters."""
    line = " ".join(redact(str(text)).split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


class RedactingStream:
    """A text stream that redacts each write before passing it on. Everything else is the wrapped stream's.

    No `buffer` attribute: code that finds it writes bytes past the redaction (click does for odd encodings)."""

    def __init__(self, stream) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(redact(text))
        return len(text)

    def writelines(self, lines) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str):
        if name == "buffer":
            raise AttributeError(name)
        return getattr(self._stream, name)


def redact_streams() -> None:
    """sys.stdout and sys.stderr redacted from now on, for the rest of the process: a traceback printed after
    the command has returned goes through them too. Wrapping twice is a no-op."""
    if not isinstance(sys.stdout, RedactingStream):
        sys.stdout = RedactingStream(sys.stdout)
    if not isinstance(sys.stderr, RedactingStream):
        sys.stderr = RedactingStream(sys.stderr)


@contextlib.contextmanager
def redacting_streams() -> Iterator[None]:
    """sys.stdout and sys.stderr redacted for the duration (a command run in-process, under a test runner)."""
    saved = sys.stdout, sys.stderr
    redact_streams()
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved
