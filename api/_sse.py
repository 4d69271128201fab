"""The SSE endpoint's generator: replay from `Last-Event-ID`, then follow live chunks.

The stream log is the source of truth, so any gateway replica can serve any reconnect: a client
that comes back with `Last-Event-ID: n` gets exactly the chunks after `n`, in order, then the
live tail, and always a final `[DONE]` once the turn has ended.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

from sse_starlette import EventSourceResponse, ServerSentEvent

from api.deps import Resources
from think.storage import TERMINAL_STATUSES
from think.streaming import TERMINAL_CHUNKS, read

PING_EVERY = 15.0
RECHECK_EVERY = 5.0
HEADERS = {
    "cache-control": "no-cache",
    "x-vercel-ai-ui-message-stream": "v1",
    "x-accel-buffering": "no",
}


def encode(seq: int, chunk: dict[str, Any]) -> ServerSentEvent:
    """The wire form of one chunk; the only place chunks are encoded for clients."""
    return ServerSentEvent(json.dumps(chunk, separators=(",", ":")), id=str(seq), sep="\n")


DONE = ServerSentEvent("[DONE]", sep="\n")


def _ping() -> ServerSentEvent:
    return ServerSentEvent(comment="ping", sep="\n")


async def follow(res: Resources, turn_id: str, after: int) -> AsyncIterator[ServerSentEvent]:
    db = res.store.db
    with res.listener.subscribe(turn_id) as event:
        while True:
            event.clear()
            async with db.connection() as conn:
                rows = await read(conn, turn_id, after)
            for seq, chunk in rows:
                yield encode(seq, chunk)
                after = seq
                if chunk.get("type") in TERMINAL_CHUNKS:
                    yield DONE
                    return
            if rows:
                continue
            turn = await res.store.get_turn(turn_id)
            if turn is None or turn.status in TERMINAL_STATUSES:
                # The status and the last chunks commit together, but may have landed between
                # our two reads: look once more before concluding they were pruned.
                async with db.connection() as conn:
                    if await read(conn, turn_id, after, limit=1):
                        continue
                yield DONE
                return
            # Re-check now and then even without a NOTIFY (one may be lost in a reconnect).
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(event.wait(), timeout=RECHECK_EVERY)


def stream_response(res: Resources, turn_id: str, after: int) -> EventSourceResponse:
    # sse-starlette sends the keep-alive comments and notices disconnects; resume is ours.
    return EventSourceResponse(
        follow(res, turn_id, after),
        # The turn's id, so a client of a `mode: "stream"` submission can resume or cancel it.
        headers={**HEADERS, "x-think-turn-id": turn_id},
        ping=PING_EVERY,
        ping_message_factory=_ping,
        sep="\n",
    )
