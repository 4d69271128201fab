"""A worker's own HTTP port (THINK_WORKER_METRICS_PORT): `/metrics` for Prometheus, and the
probes an orchestrator asks, `/healthz` (the process answers) and `/readyz` (200 once the
worker polls its task queue, 503 before and once it is shutting down).

A worker has no HTTP server otherwise, and needs none of a framework's: a WSGI app on the
standard library's server, in daemon threads, as `prometheus_client.start_http_server` runs
its own (whose app answers `/metrics` here).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import make_wsgi_app

StartResponse = Callable[..., Any]
_JSON = ("Content-Type", "application/json")


class Readiness:
    """What a worker's `/readyz` says: not yet (starting), ok (polling), or shutting down.
    Set from the worker's event loop, read from the server's threads (a plain attribute
    write is atomic)."""

    def __init__(self) -> None:
        self.state = "starting"

    def polling(self) -> None:
        self.state = "ok"

    def stopping(self) -> None:
        self.state = "shutting down"

    @property
    def ready(self) -> bool:
        return self.state == "ok"


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True
    allow_reuse_address = True


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        """Probes every few seconds would fill the worker's log."""


def probes_app(readiness: Readiness) -> Callable[[dict[str, Any], StartResponse], Iterable[bytes]]:
    """The WSGI app of the port: the probes by path, Prometheus's exposition for the rest."""
    metrics = make_wsgi_app()

    def app(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        if path == "/healthz":
            start_response("200 OK", [_JSON])  # a new list: wsgiref adds to it
            return [b'{"status": "ok"}']
        if path == "/readyz":
            body = {
                "status": "ok" if readiness.ready else "unavailable",
                "checks": {"polling": readiness.state},
            }
            status = "200 OK" if readiness.ready else "503 Service Unavailable"
            start_response(status, [_JSON])
            return [json.dumps(body).encode()]
        return metrics(environ, start_response)  # type: ignore[no-any-return]

    return app


def serve(port: int, host: str = "0.0.0.0", readiness: Readiness | None = None) -> WSGIServer:
    """Serve `/metrics`, `/healthz` and `/readyz` on `port`, from daemon threads. Raises
    OSError when the port is taken. Returns the server (`shutdown()` stops it)."""
    server = make_server(
        host, port, probes_app(readiness or Readiness()), _Server, handler_class=_Quiet
    )
    threading.Thread(target=server.serve_forever, name="think-metrics", daemon=True).start()
    return server
