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

from think.streaming._log import CHANNEL

log = logging.getLogger("think.streaming.listener")


class ChunkListener:
    """Listens on `channel`: the stream log's by default; workers listen for cancels."""

    def __init__(self, dsn: str, channel: str = CHANNEL) -> None:
        self._dsn = dsn
        self._channel = channel
        self._waiters: dict[str, set[asyncio.Event]] = defaultdict(set)
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
    def subscribe(self, turn_id: str) -> Iterator[asyncio.Event]:
        """An event that is set whenever the turn may have new chunks."""
        event = asyncio.Event()
        self._waiters[turn_id].add(event)
        try:
            yield event
        finally:
            waiters = self._waiters.get(turn_id)
            if waiters is not None:
                waiters.discard(event)
                if not waiters:
                    del self._waiters[turn_id]

    def _wake(self, turn_id: str | None = None) -> None:
        targets = (
            [self._waiters.get(turn_id, set())] if turn_id is not None else self._waiters.values()
        )
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
