"""A fake payments API on 127.0.0.1 that honours idempotency keys, as Stripe's does: a POST
with a key it has seen answers the first answer again (`replayed: true`) and makes no second
effect. It counts requests and effects per path, which is what the actions tests assert."""

from __future__ import annotations

import json
import secrets
import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class FakePayments:
    def __init__(self) -> None:
        self.requests: Counter[str] = Counter()
        self.effects: Counter[str] = Counter()
        self._answers: dict[tuple[str, str], dict[str, Any]] = {}
        self._lock = threading.Lock()
        payments = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                answer = payments._post(self.path, self.headers.get("Idempotency-Key"), body)
                data = json.dumps(answer).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def _post(self, path: str, key: str | None, body: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            self.requests[path] += 1
            if key is not None and (path, key) in self._answers:
                return {**self._answers[(path, key)], "replayed": True}
            self.effects[path] += 1
            answer = {**body, "refund_id": f"re_{secrets.token_hex(4)}", "replayed": False}
            if key is not None:
                self._answers[(path, key)] = answer
            return answer

    def __enter__(self) -> FakePayments:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
