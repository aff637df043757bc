"""A local HTTP server that fails on purpose, quoting the request's headers (the token among them) in its answer.

Modes: "json-<status>" (GitHub-style {"message": ...}), "text-<status>" (a plain body), "html-200" (a 200 that is
not JSON), "list-200" (JSON of the wrong shape), "hang" (accepts, never answers), "close" (hangs up at once), "drip"
(a status line, then a byte of headers every DRIP_S for ever), "dripbody" (the body a byte every DRIP_S).
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler

from local_server import LocalServer

DRIP_S = 0.05  # well under the tests' read timeout: every wait for a byte is answered in time


class EchoServer(LocalServer):
    def __init__(self, mode: str = "json-500") -> None:
        self.mode = mode
        self.requests: list[tuple[str, str]] = []
        self._closing = threading.Event()
        super().__init__(self._handler())
        self.server.daemon_threads = True  # a hanging or dripping answer must not hold up the close

    def __exit__(self, *exc) -> None:
        self._closing.set()  # the hanging and dripping answers stop
        super().__exit__(*exc)

    def _handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def _answer(self) -> None:
                server.requests.append((self.command, self.path))
                length = int(self.headers.get("Content-Length") or 0)
                if length:
                    self.rfile.read(length)
                echoed = "".join(f"{k}: {v}\n" for k, v in self.headers.items())
                kind, _, status = server.mode.partition("-")
                if kind == "hang":
                    server._closing.wait(30)
                    return
                if kind == "close":
                    self.close_connection = True
                    return
                if kind == "drip":  # a status line, then one byte of headers every DRIP_S, for ever
                    self.wfile.write(b"HTTP/1.1 200 OK\r\n")
                    self._drip(b"X-Slow: " + b"a" * 10_000)
                    return
                if kind == "dripbody":  # whole headers, then the body one byte every DRIP_S
                    self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n")
                    self.wfile.write(b"Content-Length: 10000\r\n\r\n")
                    self._drip(b" " * 10_000)
                    return
                if kind == "json":
                    body = json.dumps({"message": f"Bad credentials; you sent:\n{echoed}", "errors": [echoed]})
                elif kind == "list":
                    body = json.dumps([echoed])
                else:
                    body = f"<html>upstream error\n{echoed}</html>"
                data = body.encode()
                self.send_response(int(status))
                self.send_header("Content-Type", "application/json" if kind in ("json", "list") else "text/html")
                self.send_header("Content-Length", str(len(data)))
                self.send_header("Retry-After", "3600")  # must not stretch our retries
                self.end_headers()
                self.wfile.write(data)

            def _drip(self, data: bytes) -> None:
                try:
                    for i in range(len(data)):
                        self.wfile.write(data[i : i + 1])
                        self.wfile.flush()
                        if server._closing.wait(DRIP_S):
                            return
                except OSError:  # the client gave up: what the test wants
                    return

            do_GET = do_POST = do_DELETE = do_PUT = do_PATCH = do_HEAD = _answer

        return Handler
