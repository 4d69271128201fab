"""One LISTEN connection per process, fanned out to every open stream and waiting caller.

A thousand open SSE streams must not mean a thousand Postgres connections: each stream (or a
`ThinkService` caller waiting for a turn) registers an event for its turn here, and the single
listener sets it when Postgres announces new chunks. A batch small enough is announced with its
chunks (`ANNOUNCED_BYTES`), which a stream takes from its `ChunkInbox` without a read; the rest
(a bigger batch, a gap, a reconnect) is read through the shared pool. The gateway holds one; a
`ThinkService` opens one on its first blocking call.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import defaultdict, deque
from collections.abc import Callable, Iterator

import orjson
import psycopg

from think._protocol import UIMessageChunk
from think.storage import PAUSED_STATUSES, TERMINAL_STATUSES
from think.storage.stream_log import CHANNEL, STATUS_SUFFIX

_SETTLED = TERMINAL_STATUSES | PAUSED_STATUSES
INBOX_LIMIT = 2000
"""Announced chunks an inbox holds for a reader that has fallen behind; beyond, it drops
them and the reader reads from the table."""

log = logging.getLogger("think.streaming.listener")

Announced = tuple[int, UIMessageChunk, float]
"""A chunk as announced: its sequence number, the chunk, and when it was written."""


class ChunkInbox:
    """What a stream of one turn was told: an event set on every announcement, and the
    chunks announced with their batch, in the order they committed."""

    def __init__(self) -> None:
        self.event = asyncio.Event()
        self._chunks: deque[Announced] = deque()
        self._must_read = True
        """Something may be in the table that was not announced here: on subscribing, after
        a bare announcement (a big batch) or a reconnect, and when chunks were dropped."""

    def offer(self, start: int, chunks: list[UIMessageChunk], written: float) -> None:
        if len(self._chunks) + len(chunks) > INBOX_LIMIT:
            self._chunks.clear()
            self._must_read = True
        else:
            self._chunks.extend((start + i, chunk, written) for i, chunk in enumerate(chunks))
        self.event.set()

    def must_read(self) -> None:
        self._must_read = True
        self.event.set()

    def take(self, after: int) -> list[Announced] | None:
        """The announced chunks that follow sequence number `after`, without a gap; None when
        the reader must read the table instead (and from then on, this inbox is trusted
        again: what is announced meanwhile is kept)."""
        while self._chunks and self._chunks[0][0] <= after:
            self._chunks.popleft()  # read from the table already
        if self._must_read or (self._chunks and self._chunks[0][0] != after + 1):
            self._must_read = False
            return None
        taken: list[Announced] = []
        while self._chunks and self._chunks[0][0] == after + 1 + len(taken):
            taken.append(self._chunks.popleft())
        return taken


class ChunkListener:
    """Listens on `channel`: the stream log's by default; workers listen for cancels."""

    def __init__(self, dsn: str, channel: str = CHANNEL) -> None:
        self._dsn = dsn
        self._channel = channel
        self._waiters: dict[str, set[asyncio.Event]] = defaultdict(set)
        self._status_waiters: dict[str, set[asyncio.Event]] = defaultdict(set)
        self._inboxes: dict[str, set[ChunkInbox]] = defaultdict(set)
        self._task: asyncio.Task[None] | None = None
        self._ready = asyncio.Event()

    async def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name=f"think-listener-{self._channel}")
        await asyncio.wait_for(self._ready.wait(), timeout=10)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    @property
    def connected(self) -> bool:
        return self._ready.is_set()

    @contextlib.contextmanager
    def subscribe(self, turn_id: str, *, status_only: bool = False) -> Iterator[asyncio.Event]:
        """An event that is set whenever the turn may have new chunks or, with `status_only`,
        only when it may have settled: its status changed to a terminal or paused one (a
        trigger on `turns` announces each change with the new status), so a caller waiting for
        a turn to settle re-reads it once or twice per turn, not per chunk or per change."""
        table = self._status_waiters if status_only else self._waiters
        event = asyncio.Event()
        table[turn_id].add(event)
        try:
            yield event
        finally:
            waiters = table.get(turn_id)
            if waiters is not None:
                waiters.discard(event)
                if not waiters:
                    del table[turn_id]

    @contextlib.contextmanager
    def inbox(self, turn_id: str) -> Iterator[ChunkInbox]:
        """A `ChunkInbox` for the turn's chunks: what a stream follows."""
        inbox = ChunkInbox()
        self._inboxes[turn_id].add(inbox)
        try:
            yield inbox
        finally:
            inboxes = self._inboxes.get(turn_id)
            if inboxes is not None:
                inboxes.discard(inbox)
                if not inboxes:
                    del self._inboxes[turn_id]

    def _wake(self, payload: str | None = None) -> None:
        if payload is None:
            for every in self._inboxes.values():
                for inbox in every:
                    inbox.must_read()
            targets = [*self._waiters.values(), *self._status_waiters.values()]
        elif "\n" in payload:  # a batch announced with its chunks (none of the others has one)
            turn_id, start, written, chunks = payload.split("\n", 3)
            inboxes = self._inboxes.get(turn_id, set())
            if inboxes:
                batch = orjson.loads(chunks)
                for inbox in inboxes:
                    inbox.offer(int(start), batch, float(written))
            targets = [self._waiters.get(turn_id, set())]
        elif STATUS_SUFFIX in payload:
            turn_id, _, status = payload.rpartition(STATUS_SUFFIX)
            if status.startswith("/") and status[1:] not in _SETTLED:
                return  # it changed, to a status nobody waits for (pending, running)
            targets = [self._status_waiters.get(turn_id, set())]
        else:
            for inbox in self._inboxes.get(payload, ()):
                inbox.must_read()
            targets = [self._waiters.get(payload, set())]
        for events in targets:
            for event in events:
                event.set()

    async def _run(self) -> None:
        def connected() -> None:
            self._ready.set()
            # Anything announced while we were away: let every stream re-read.
            self._wake()

        def lost() -> None:
            self._ready.clear()
            self._wake()

        await listen_forever(
            self._dsn, self._channel, self._wake, on_connect=connected, on_lost=lost
        )


async def listen_forever(
    dsn: str,
    channel: str,
    on_payload: Callable[[str], None],
    *,
    on_connect: Callable[[], None] | None = None,
    on_lost: Callable[[], None] | None = None,
) -> None:
    """LISTEN on `channel` until cancelled, handing each payload to `on_payload`; a lost
    connection is reopened (backing off to 5 s), with `on_lost` told at once and `on_connect`
    once listening again: what was announced meanwhile is gone."""
    backoff = 0.2
    while True:
        try:
            async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
                await conn.execute(f"LISTEN {channel}")
                backoff = 0.2
                if on_connect is not None:
                    on_connect()
                async for notify in conn.notifies():
                    on_payload(notify.payload)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.warning("LISTEN %s: connection lost; reconnecting", channel, exc_info=True)
            if on_lost is not None:
                on_lost()
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, 5.0)
