"""What the fetch tests share: a resolver with canned answers and a connector that opens no
socket except to this machine's test server, and that server.

`Sealed` is the guarantee that a refusal test cannot leak: every connection the code under
test asks for is recorded, and one to an address outside `routes` raises (the test fails on
the recorded attempt) before any socket exists. `routes` maps a public-looking address, known
only to the test, to the 127.0.0.1 server, so an allowed `fetch_url` is served locally.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpcore

PUBLIC_IP = "93.184.215.14"
"""A public address: the test server, as `Sealed` routes it."""


class LeakAttempt(AssertionError):
    """The code under test asked to connect where no test server is."""


class Sealed(httpcore.AsyncNetworkBackend):
    def __init__(self, routes: dict[str, int] | None = None) -> None:
        self.routes = routes or {}
        self.attempts: list[tuple[str, int]] = []
        self._real = httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore's interface
        local_address: str | None = None,
        socket_options: Any = None,
    ) -> httpcore.AsyncNetworkStream:
        self.attempts.append((host, port))
        if host not in self.routes:
            raise LeakAttempt(f"a connection to {host}:{port} was attempted")
        return await self._real.connect_tcp("127.0.0.1", self.routes[host], timeout=timeout)

    async def sleep(self, seconds: float) -> None:
        await self._real.sleep(seconds)


class Resolver:
    """Canned DNS: each name's answers, in turn (the last one repeats); records lookups."""

    def __init__(self, answers: dict[str, Sequence[Sequence[str]]] | None = None) -> None:
        self.answers = {k: list(v) for k, v in (answers or {}).items()}
        self.lookups: list[str] = []

    async def __call__(self, host: str, port: int) -> list[str]:
        self.lookups.append(host)
        if host not in self.answers:
            raise OSError(f"NXDOMAIN {host}")
        queue = self.answers[host]
        return list(queue.pop(0) if len(queue) > 1 else queue[0])


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self.server.seen.append((self.path, {k.lower(): v for k, v in self.headers.items()}))
        route = self.path.split("?", 1)[0]
        port = self.server.server_address[1]
        if route.endswith("/echo"):
            self._send(200, "application/json", json.dumps(dict(self.headers.items())).encode())
        elif route.endswith("/page"):
            self._send(200, "text/markdown; charset=utf-8", b"# Limits\n\nAt most 10 requests.")
        elif route.endswith("/data"):
            self._send(200, "application/json", b'{"items": [1, 2, 3]}')
        elif route.endswith("/nul"):
            # A page with a NUL byte, and an emoji (tests/storage/test_hostile_content.py).
            self._send(200, "text/plain; charset=utf-8", "a\x00b \U0001f600".encode())
        elif route.endswith("/nul.json"):
            # JSON whose escapes decode to a NUL and a lone surrogate, beside a valid pair.
            self._send(200, "application/json", b'{"a\\u0000": "x\\u0000y \\ud800 \\ud83d\\ude00"}')
        elif route.endswith("/badjson"):
            self._send(200, "application/json", b"{not json")
        elif route.endswith("/long"):
            self._send(200, "text/plain", b"x" * 5000)
        elif route.endswith("/big"):
            self._send(200, "text/plain", b"y" * 50_000)
        elif route.endswith("/latin1"):
            self._send(200, "text/plain; charset=iso-8859-1", "café".encode("latin-1"))
        elif route.endswith("/oddcharset"):
            self._send(200, "text/plain; charset=x-no-such-codec", "naïve".encode())
        elif route.endswith("/bin"):
            self._send(200, "application/octet-stream", bytes(range(256)))
        elif route.endswith("/missing"):
            self._send(404, "text/plain", b"no such page")
        elif route.endswith("/slow"):
            time.sleep(2)
            self._send(200, "text/plain", b"late")
        elif "/go/" in route:
            # /go/<anything> redirects to the query's `to`, e.g. ?to=http://127.0.0.1:1/x
            target = self.path.split("to=", 1)[1] if "to=" in self.path else "/"
            self._redirect(target.replace("PORT", str(port)))
        else:
            self._send(200, "text/plain", b"ok")

    def _send(self, status: int, content_type: str, body: bytes) -> None:
        self.send_response(status)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _redirect(self, location: str) -> None:
        self.send_response(302)
        self.send_header("location", location)
        self.send_header("content-length", "0")
        self.end_headers()


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.seen: list[tuple[str, dict[str, str]]] = []

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    @property
    def paths(self) -> list[str]:
        return [p for p, _ in self.seen]


@contextmanager
def local_server() -> Iterator[_Server]:
    server = _Server()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
