"""The SSE endpoint's generator: replay from `Last-Event-ID`, then follow live chunks.

The stream log is the source of truth, so any gateway replica can serve any reconnect: a client
that comes back with `Last-Event-ID: n` gets exactly the chunks after `n`, in order, then the
live tail, and always a final `[DONE]` once the turn has ended.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import AsyncIterator, Mapping
from typing import Any

import psycopg
from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.types import Receive, Scope, Send

from api._limits import Release
from api.deps import Resources
from think import server
from think.server import metrics, public_turn_id

log = logging.getLogger("think.api.stream")

PING_EVERY = 15.0
HEADERS = {
    "cache-control": "no-cache",
    "x-vercel-ai-ui-message-stream": "v1",
    "x-accel-buffering": "no",
}


def encode(seq: int, chunk: Mapping[str, Any]) -> ServerSentEvent:
    """The wire form of one chunk (a `think.streaming.UIMessageChunk`, or the plain dict the
    stream log reads back); the only place chunks are encoded for clients."""
    return ServerSentEvent(json.dumps(chunk, separators=(",", ":")), id=str(seq), sep="\n")


DONE = ServerSentEvent("[DONE]", sep="\n")


def _ping() -> ServerSentEvent:
    return ServerSentEvent(comment="ping", sep="\n")


async def follow(
    res: Resources, turn_id: str, after: int, live_since: float | None
) -> AsyncIterator[ServerSentEvent]:
    """The turn's chunks after `after`, then live ones (`think.server.follow`, which the
    Python turn API streams from too), and always `[DONE]` at the end."""
    try:
        # Closed here, not by the garbage collector, when the client goes away mid-stream.
        async with contextlib.aclosing(
            server.follow(res.store, res.listener, turn_id, after, live_since)
        ) as chunks:
            async for seq, chunk in chunks:
                yield encode(seq, chunk)
    except psycopg.OperationalError as exc:
        # Postgres is away (down, restarting, no connection within the pool's timeout): the
        # stream cannot go on, and that is expected, not a bug, so one line per stream rather
        # than "Exception in ASGI application" and a traceback each. The response ends
        # cleanly, without `[DONE]` (the turn has not ended): the client resumes it with
        # `Last-Event-ID` once the gateway answers again (a 503 meanwhile).
        cause = " ".join(str(exc).split()) or type(exc).__name__
        log.warning(
            "stream of turn %s dropped: the database is unavailable (%s); "
            "its client may resume it with Last-Event-ID",
            turn_id,
            cause,
        )
        return
    yield DONE


class _CountedStream(EventSourceResponse):
    """Gives its tenant's stream slot back when the response ends, however it ends (done,
    client gone, server stopping): the ASGI call returns in every case, where a generator
    that never started would never run its `finally`."""

    def __init__(self, release: Release, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._release = release

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        metrics.STREAMS_OPEN.inc()
        try:
            await super().__call__(scope, receive, send)
        finally:
            metrics.STREAMS_OPEN.dec()
            await self._release()


def stream_response(
    res: Resources,
    turn_id: str,
    after: int,
    release: Release,
    live_since: float | None = None,
) -> EventSourceResponse:
    """`release` gives back the stream slot taken from the tenant's limit (`TenantLimits`);
    `live_since` is `think.server.follow`'s."""
    # sse-starlette sends the keep-alive comments and notices disconnects; resume is ours.
    return _CountedStream(
        release,
        content=follow(res, turn_id, after, live_since),
        # The turn's id, so a client of a `mode: "stream"` submission can resume or cancel it:
        # as clients name it (its submission id, not the id stored for it).
        headers={**HEADERS, "x-think-turn-id": public_turn_id(turn_id)},
        ping=PING_EVERY,
        ping_message_factory=_ping,
        sep="\n",
    )
