"""The SSE endpoint's generator: replay from `Last-Event-ID`, then follow live chunks.

The stream log is the source of truth, so any gateway replica can serve any reconnect: a client
that comes back with `Last-Event-ID: n` gets exactly the chunks after `n`, in order, then the
live tail, and always a final `[DONE]` once the turn has ended.
"""

from __future__ import annotations

import asyncio
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
from think.server import PAUSED_STATUSES, metrics, public_turn_id

log = logging.getLogger("think.api.stream")

PING_EVERY = 15.0
PAUSE_CHECK = 0.5
"""How often a chat stream that has gone quiet asks whether its turn paused for a person."""
PAUSED: Mapping[str, object] = {"type": "finish", "finishReason": "tool-calls"}
"""What ends a chat stream at a pause: the AI SDK's end of a response that waits for tool
results or approvals (useChat is then `ready`, and sends the answers with its next POST).
Not in the stream log: a later read of the turn goes on past the pause."""
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
    res: Resources,
    turn_id: str,
    after: int,
    live_since: float | None,
    *,
    end_at_pause: bool = False,
) -> AsyncIterator[ServerSentEvent]:
    """The turn's chunks after `after`, then live ones (`think.server.follow`, which the
    Python turn API streams from too), and always `[DONE]` at the end. With `end_at_pause`
    (the AI SDK's chat transports), also ended, with a `finish`, once the turn waits for a
    person or a client tool and the client has every chunk written before the pause."""
    try:
        # Closed here, not by the garbage collector, when the client goes away mid-stream.
        async with contextlib.aclosing(
            server.follow(res.store, res.listener, turn_id, after, live_since)
        ) as chunks:
            read: AsyncIterator[tuple[int, Mapping[str, object]]] = (
                _until_paused(res, turn_id, after, chunks) if end_at_pause else chunks
            )
            async for seq, chunk in read:
                yield (
                    ServerSentEvent(json.dumps(chunk, separators=(",", ":")), sep="\n")
                    if seq < 0
                    else encode(seq, chunk)
                )
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


async def _until_paused(
    res: Resources,
    turn_id: str,
    after: int,
    chunks: AsyncIterator[tuple[int, Mapping[str, object]]],
) -> AsyncIterator[tuple[int, Mapping[str, object]]]:
    """`chunks`, until the turn is paused with all of its chunks read: then `PAUSED` (with
    sequence number -1: it has none). A paused turn's stream otherwise stays open until
    the turn ends, and useChat answers approvals only once its request has ended."""
    pending: asyncio.Future[tuple[int, Mapping[str, object]]] | None = None
    try:
        while True:
            if pending is None:
                pending = asyncio.ensure_future(anext(chunks))
            done, _ = await asyncio.wait({pending}, timeout=PAUSE_CHECK)
            if done:
                try:
                    seq, chunk = pending.result()
                except StopAsyncIteration:
                    return
                pending = None
                after = seq
                yield seq, chunk
                continue
            turn = await res.store.get_turn(turn_id)
            paused = turn is not None and turn.status in PAUSED_STATUSES
            if paused and await server.stream_tail(res.store, turn_id) <= after:
                yield -1, PAUSED
                return
    finally:
        if pending is not None and not pending.done():
            pending.cancel()
            with contextlib.suppress(asyncio.CancelledError, StopAsyncIteration):
                await pending


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
    *,
    end_at_pause: bool = False,
    headers: Mapping[str, str] | None = None,
) -> EventSourceResponse:
    """`release` gives back the stream slot taken from the tenant's limit (`TenantLimits`);
    `live_since` is `think.server.follow`'s, `end_at_pause` is `follow`'s; `headers` are
    added to the answer's."""
    # sse-starlette sends the keep-alive comments and notices disconnects; resume is ours.
    return _CountedStream(
        release,
        content=follow(res, turn_id, after, live_since, end_at_pause=end_at_pause),
        # The turn's id, so a client of a `mode: "stream"` submission can resume or cancel it:
        # as clients name it (its submission id, not the id stored for it).
        headers={**HEADERS, "x-think-turn-id": public_turn_id(turn_id), **(headers or {})},
        ping=PING_EVERY,
        ping_message_factory=_ping,
        sep="\n",
    )
