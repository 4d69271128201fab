"""Inside the sandbox: requests to the host over the inherited channel (fd `$THINK_HOST_FD`).

    import think_host
    answer = think_host.request({"op": "echo", "value": 1})       # blocking
    answer = await think_host.arequest({"op": "echo", "value": 2})  # asyncio; may be gathered

Each request is a JSON object; the host answers a JSON object, or the call raises `HostError`
with the host's error type and message. Standard library only (the sandbox has nothing else).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import socket
import threading
from typing import Any

__all__ = ["HostError", "arequest", "available", "fetch", "request"]


class HostError(Exception):
    """The host refused or failed the request; `type` names the host's error."""

    def __init__(self, type_: str, message: str) -> None:
        super().__init__(f"{type_}: {message}")
        self.type = type_
        self.message = message


_lock = threading.Lock()
_ids = itertools.count(1)
_waiting: dict[int, list[Any]] = {}
_conn: socket.socket | None = None
_reader: Any = None


def available() -> bool:
    """Whether this run has a channel to the host."""
    return "THINK_HOST_FD" in os.environ


def _connection() -> socket.socket:
    global _conn, _reader
    if _conn is None:
        if not available():
            raise HostError("NoChannel", "this sandboxed run has no channel to the host")
        _conn = socket.socket(fileno=int(os.environ["THINK_HOST_FD"]))
        _reader = _conn.makefile("rb")
        threading.Thread(target=_read_replies, daemon=True).start()
    return _conn


def _read_replies() -> None:
    for line in _reader:
        reply = json.loads(line)
        slot = _waiting.pop(reply.get("id"), None)
        if slot is not None:
            slot[1] = reply
            slot[0].set()
    for slot in list(_waiting.values()):
        slot[1] = {"error": {"type": "ChannelClosed", "message": "the host closed the channel"}}
        slot[0].set()


def request(payload: dict[str, Any]) -> Any:
    """Send one request and wait for its answer."""
    with _lock:
        conn = _connection()
        ident = next(_ids)
        slot: list[Any] = [threading.Event(), None]
        _waiting[ident] = slot
        conn.sendall(json.dumps({"id": ident, "request": payload}).encode() + b"\n")
    slot[0].wait()
    reply = slot[1]
    if "error" in reply:
        error = reply["error"]
        raise HostError(str(error.get("type")), str(error.get("message")))
    return reply["response"]


async def arequest(payload: dict[str, Any]) -> Any:
    """`request` for asyncio code: several may be awaited at once."""
    return await asyncio.to_thread(request, payload)


def fetch(url: str) -> Any:
    """`exec`'s way to the network, where the agent allows it: the worker fetches `url` under
    the agent's `fetch_tools` rules and answers what `fetch_url` would (`ok`, `status`,
    `body`, or `code` and `message`)."""
    return request({"fetch": url})
