"""Serve a built dashboard folder on 127.0.0.1 until interrupted (loopback only: it is a preview, not a server)."""

from __future__ import annotations

import functools
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from dayone.core.errors import InputError


def make_server(folder: Path, port: int) -> ThreadingHTTPServer:
    handler = functools.partial(SimpleHTTPRequestHandler, directory=str(folder))
    try:
        return ThreadingHTTPServer(("127.0.0.1", port), handler)
    except OSError as err:
        raise InputError(f"--port {port}: cannot listen on 127.0.0.1 ({err.strerror})") from None
