"""A webhook receiver for tests: a real HTTP server on 127.0.0.1 that records every POST and
answers each route's scripted statuses in turn, per event id (the last one repeats)."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Delivery:
    path: str
    headers: dict[str, str]
    body: bytes

    @property
    def json(self) -> dict[str, Any]:
        found: dict[str, Any] = json.loads(self.body)
        return found


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, routes: dict[str, list[int]]) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.routes = routes
        self.seen: list[Delivery] = []
        self.lock = threading.Lock()


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length", "0"))
        body = self.rfile.read(length)
        headers = {k.lower(): v for k, v in self.headers.items()}
        with self.server.lock:
            delivery = Delivery(self.path, headers, body)
            earlier = sum(
                1
                for d in self.server.seen
                if d.path == self.path
                and d.headers.get("x-think-event-id") == headers.get("x-think-event-id")
            )
            self.server.seen.append(delivery)
            plan = self.server.routes.get(self.path, [404])
            status = plan[min(earlier, len(plan) - 1)]
        self.send_response(status)
        self.send_header("content-length", "0")
        self.end_headers()


class Receiver:
    def __init__(self, server: _Server) -> None:
        self._server = server

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def deliveries(self, path: str, event_id: str | None = None) -> list[Delivery]:
        with self._server.lock:
            return [
                d
                for d in self._server.seen
                if d.path == path
                and (event_id is None or d.headers.get("x-think-event-id") == event_id)
            ]

    def for_turn(self, path: str, turn_id: str) -> list[Delivery]:
        return [d for d in self.deliveries(path) if d.json["turn_id"] == turn_id]

    async def wait_for_turn(
        self, path: str, turn_id: str, count: int, within: float = 60
    ) -> list[Delivery]:
        """The deliveries of the turn's events to `path`, once there are `count` of them."""
        deadline = asyncio.get_running_loop().time() + within
        while True:
            found = self.for_turn(path, turn_id)
            if len(found) >= count or asyncio.get_running_loop().time() > deadline:
                return found
            await asyncio.sleep(0.05)


@contextmanager
def receiver(routes: dict[str, list[int]]) -> Iterator[Receiver]:
    server = _Server(routes)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield Receiver(server)
    finally:
        server.shutdown()
        server.server_close()
