"""A counting HTTP server on 127.0.0.1: each POST to /<name> counts one run of tool <name>,
and answers `{"first": true}` to the first of them (a tool that stalls on its first run)."""

from __future__ import annotations

import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class Effects:
    def __init__(self) -> None:
        self.runs: Counter[str] = Counter()
        lock = threading.Lock()
        runs = self.runs

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with lock:
                    runs[self.path.strip("/")] += 1
                    first = runs[self.path.strip("/")] == 1
                body = b'{"first": true}' if first else b'{"first": false}'
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> Effects:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
