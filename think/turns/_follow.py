"""The SSE replay loop: a turn's stored chunks after a sequence number, then its live ones as
they are announced, until the last. The gateway's stream routes, a resumed stream
(`Last-Event-ID`) and the Python turn API's streams all read a turn through `follow`."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator

from think import metrics
from think._protocol import UIMessageChunk, is_terminal_chunk
from think.storage import TERMINAL_STATUSES, Store, TurnRecord
from think.streaming import ChunkListener, read, read_timed, tail
from think.turns._waiting import RECHECK_EVERY


async def follow(
    store: Store,
    listener: ChunkListener,
    turn_id: str,
    after: int = -1,
    live_since: float | None = None,
) -> AsyncGenerator[tuple[int, UIMessageChunk], None]:
    """The turn's chunks after sequence number `after`, then its live ones, until the last
    (`finish`, `error` or `abort`), or until the turn has ended and its chunks were pruned.
    `live_since`: chunks written from then on are live (their lag is observed), by default
    from now on; a submission's stream counts all of its new turn's, which a worker started
    eagerly may have written before the stream began reading."""
    db = store.db
    since = time.time() if live_since is None else live_since
    with listener.inbox(turn_id) as inbox:
        while True:
            inbox.event.clear()
            # Live chunks come with their announcement; the table is read for the rest (the
            # replay, a batch too big to announce, a gap, a reconnect).
            announced = inbox.take(after)
            if announced is None:
                async with db.connection() as conn:
                    rows = await read_timed(conn, turn_id, after)
            else:
                rows = announced
            for seq, chunk, written in rows:
                if written >= since:  # live, not replayed: how long it took to get here
                    metrics.STREAM_LAG.observe(max(0.0, time.time() - written))
                yield seq, chunk
                after = seq
                if is_terminal_chunk(chunk):
                    return
            if rows:
                continue
            if announced is None:  # nothing new in the table either: has the turn ended?
                turn = await store.get_turn(turn_id)
                if turn is None or turn.status in TERMINAL_STATUSES:
                    # The status and the last chunks commit together, but may have landed
                    # between our two reads: look once more before concluding they were pruned.
                    async with db.connection() as conn:
                        if await read(conn, turn_id, after, limit=1):
                            continue
                    return
            # Re-check now and then even without a NOTIFY (one may be lost in a reconnect).
            try:
                await asyncio.wait_for(inbox.event.wait(), timeout=RECHECK_EVERY)
            except TimeoutError:
                inbox.must_read()


async def stream_tail(store: Store, turn_id: str) -> int:
    """The sequence number of the turn's last chunk so far, -1 before its first. Sequence
    numbers count a turn's chunks from 0 without gaps, so chunk N of a stream is seq N."""
    async with store.db.connection() as conn:
        return await tail(conn, turn_id)


async def asked_at(
    store: Store, turn_id: str, approval_ids: set[str], tool_call_ids: set[str]
) -> int | None:
    """The sequence number of the last chunk that asked the person for one of these answers
    (a `tool-approval-request` by its approval id, a client tool's `tool-input-available` by
    its call id), None when there is none. A chat client that answers what another door
    answered first is behind: its next stream starts there, not at the tail the turn has
    moved on to meanwhile, which may be in the middle of a part the client never saw begin."""
    found: int | None = None
    after = -1
    async with store.db.connection() as conn:
        while rows := await read(conn, turn_id, after):
            for seq, chunk in rows:
                kind = chunk.get("type")
                asked = kind == "tool-approval-request" and chunk.get("approvalId") in approval_ids
                if asked or (
                    kind == "tool-input-available" and chunk.get("toolCallId") in tool_call_ids
                ):
                    found = seq
                after = seq
    return found


async def tenant_turn(store: Store, tenant: str, agent: str, turn_id: str) -> TurnRecord | None:
    """The turn of `agent` that `tenant` knows by the generated id `turn_id`, without its
    conversation (the AI SDK's workflow transport resumes by the turn's id alone); None for
    another tenant's or agent's turn, as for none, so that nothing tells them apart."""
    turn = await store.get_turn(turn_id)
    if turn is None or turn.tenant != tenant or turn.agent != agent:
        return None
    return turn
