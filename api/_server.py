"""The gateway's HTTP/1.1 protocol: uvicorn's h11 one, with two things changed.

- A request the HTTP parser refuses (a header over the size limit, a NUL or a bare newline in
  a header, a malformed request line) never reaches the app, so the app's error handlers
  cannot answer it; uvicorn answered `text/plain` "Invalid HTTP request received.". Here it
  is a problem document like every other error, with h11's own status hint (431 for headers
  too large, else 400) and its reason.
- A connection must finish sending its request headers within `header_timeout_seconds`
  (THINK_HEADER_TIMEOUT_SECONDS), or it is answered 408 and closed. uvicorn has no such
  bound: a client trickling a header a byte at a time (slow loris) held a connection, and a
  few hundred of them the server, for as long as it liked. Idle keep-alive connections are
  uvicorn's own `timeout_keep_alive` (THINK_KEEP_ALIVE_SECONDS).

`think api` runs uvicorn with `http="api._server:ProblemH11Protocol"`.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from think.server import Settings

LINGER_SECONDS = 2.0
_TITLES = {400: "Bad Request", 408: "Request Timeout", 431: "Request Header Fields Too Large"}


class _Recording:
    """The h11 connection, remembering why it last refused what it received."""

    def __init__(self, conn: h11.Connection, on_request: Any) -> None:
        self._conn = conn
        self._on_request = on_request
        self.refused: h11.RemoteProtocolError | None = None

    def next_event(self) -> Any:
        try:
            event = self._conn.next_event()
        except h11.RemoteProtocolError as exc:
            self.refused = exc
            raise
        if isinstance(event, h11.Request):
            self._on_request()
        return event

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)


class ProblemH11Protocol(H11Protocol):
    header_timeout: float | None = None
    """Read from the settings once per process, on the first connection."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._recording = _Recording(self.conn, self._headers_received)
        self.conn = self._recording  # type: ignore[assignment]
        self._header_timer: asyncio.TimerHandle | None = None
        self._lingering = False
        if ProblemH11Protocol.header_timeout is None:
            settings = Settings.from_env(find_dev_stack=False)
            ProblemH11Protocol.header_timeout = settings.header_timeout_seconds

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm_header_timer()

    def data_received(self, data: bytes) -> None:
        if self._lingering:
            return
        if self.cycle is None or self.cycle.response_complete:
            # The first bytes of a request on a kept-alive connection: its headers are due.
            self._arm_header_timer()
        super().data_received(data)

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm_header_timer()
        super().connection_lost(exc)

    def send_400_response(self, msg: str) -> None:
        refused = self._recording.refused
        status = refused.error_status_hint if refused is not None else 400
        reason = str(refused) if refused is not None and str(refused) else msg
        self._send_problem(status, f"the request is not valid HTTP/1.1: {reason}")

    def _arm_header_timer(self) -> None:
        if self._header_timer is None and self.header_timeout:
            self._header_timer = self.loop.call_later(self.header_timeout, self._headers_late)

    def _disarm_header_timer(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _headers_received(self) -> None:
        self._disarm_header_timer()

    def _headers_late(self) -> None:
        self._header_timer = None
        if self.transport.is_closing() or (self.cycle and not self.cycle.response_complete):
            return
        self.logger.warning("request headers not received within %ss", self.header_timeout)
        self._send_problem(
            408, f"the request headers did not arrive within {self.header_timeout:g} s"
        )

    def _send_problem(self, status: int, detail: str) -> None:
        """Written as bytes, not through h11: the connection state that refused the request
        is in ERROR and sends nothing more. This answer is the connection's last word."""
        title = _TITLES.get(status, "Error")
        body = json.dumps(
            {"type": "about:blank", "title": title, "status": status, "detail": detail}
        ).encode()
        head = (
            f"HTTP/1.1 {status} {title}\r\n"
            "content-type: application/problem+json\r\n"
            f"content-length: {len(body)}\r\n"
            "connection: close\r\n\r\n"
        )
        self.transport.write(head.encode("ascii") + body)
        # A lingering close (RFC 9112 9.6): say FIN, then read and drop what the client is
        # still sending for a moment. Closing at once with its unread bytes (the rest of a
        # 1 MB header) would make the kernel answer RST, which discards our answer unread.
        self._lingering = True
        if self.transport.can_write_eof():
            self.transport.write_eof()
            self.loop.call_later(LINGER_SECONDS, self.transport.close)
        else:
            self.transport.close()
