"""One LISTEN connection per process, fanned out to every open stream and waiting caller.

A thousand open SSE streams must not mean a thousand Postgres connections: each stream (or a
`ThinkService` caller waiting for a turn) registers an event for its turn here, and the single
listener sets it when Postgres announces new chunks. Readers then read the new rows through the
shared pool. The gateway holds one; a `ThinkService` opens one on its first blocking call.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import defaultdict
from collections.abc import Iterator

import psycopg

from think.storage._records import PAUSED_STATUSES, TERMINAL_STATUSES
from think.storage._stream_log import CHANNEL, STATUS_SUFFIX

_SETTLED = TERMINAL_STATUSES | PAUSED_STATUSES

log = logging.getLogger("think.streaming.listener")


class ChunkListener:
    """Listens on `channel`: the stream log's by default; workers listen for cancels."""

    def __init__(self, dsn: str, channel: str = CHANNEL) -> None:
        self._dsn = dsn
        self._channel = channel
        self._waiters: dict[str, set[asyncio.Event]] = defaultdict(set)
        self._status_waiters: dict[str, set[asyncio.Event]] = defaultdict(set)
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

    def _wake(self, payload: str | None = None) -> None:
        if payload is None:
            targets = [*self._waiters.values(), *self._status_waiters.values()]
        elif STATUS_SUFFIX in payload:
            turn_id, _, status = payload.rpartition(STATUS_SUFFIX)
            if status.startswith("/") and status[1:] not in _SETTLED:
                return  # it changed, to a status nobody waits for (pending, running)
            targets = [self._status_waiters.get(turn_id, set())]
        else:
            targets = [self._waiters.get(payload, set())]
        for events in targets:
            for event in events:
                event.set()

    async def _run(self) -> None:
        backoff = 0.2
        while True:
            try:
                async with await psycopg.AsyncConnection.connect(
                    self._dsn, autocommit=True
                ) as conn:
                    await conn.execute(f"LISTEN {self._channel}")
                    self._ready.set()
                    backoff = 0.2
                    # Anything announced while we were away: let every stream re-read.
                    self._wake()
                    async for notify in conn.notifies():
                        self._wake(notify.payload)
            except asyncio.CancelledError:
                raise
            except Exception:
                self._ready.clear()
                log.warning("LISTEN connection lost; reconnecting", exc_info=True)
                self._wake()
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 5.0)
