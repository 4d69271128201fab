"""Coalesces a model step's chunks into few INSERTs.

A fast model produces a token every few milliseconds; one INSERT + NOTIFY per token would make
Postgres the bottleneck. The writer sends the first content chunk at once (that is the latency a
user feels; `let_first_content_out` makes it so even when the model sent the whole step in one
read), then at most one batch per `interval`. When the step ends, whatever is still
buffered is handed back to the caller, which writes it in the same transaction that records the
step, so the end of a step never waits for the batching interval.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable

from think._protocol import UIMessageChunk, is_content_chunk
from think.storage import Conn, Database
from think.storage.stream_log import Fence, append


class ChunkWriter:
    def __init__(
        self,
        db: Database,
        turn_id: str,
        fence: Fence,
        *,
        interval: float = 0.05,
        after_flush: Callable[[Conn], Awaitable[None]] | None = None,
        first_content_at_once: bool = True,
    ) -> None:
        """`after_flush` runs after each batch, on the batch's connection: a sub-agent's
        step tells its parent's stream how far it has got (it must not raise).
        `first_content_at_once=False`: nobody waits for the first words (the submitter waits
        for the whole answer), so they are batched like the rest, the first batch `interval`
        after the writer starts; a step shorter than that is written whole with its end."""
        self._db = db
        self._after_flush = after_flush
        self._turn_id = turn_id
        self._fence = fence
        self._interval = interval
        self._buffer: list[UIMessageChunk] = []
        self._task: asyncio.Task[None] | None = None
        # Once content is sent, batches wait out `interval` since the last one: starting as if
        # it had been sent now is what batches the first words too.
        self._last_flush = 0.0 if first_content_at_once else time.monotonic()
        self._content_sent = not first_content_at_once
        self._first_content_nudged = False
        self._closing = asyncio.Event()
        self._content_arrived = asyncio.Event()
        self._error: BaseException | None = None

    @property
    def fence(self) -> Fence:
        return self._fence

    def emit(self, chunk: UIMessageChunk) -> None:
        """Queue a chunk; raises the write error (e.g. `StaleAttempt`) of an earlier batch."""
        if self._error is not None:
            raise self._error
        self._buffer.append(chunk)
        if is_content_chunk(chunk):
            self._content_arrived.set()
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._drain())

    async def _drain(self) -> None:
        try:
            while self._buffer and not self._closing.is_set():
                if self._content_sent:
                    wait = self._last_flush + self._interval - time.monotonic()
                    if wait > 0:
                        with contextlib.suppress(TimeoutError):
                            await asyncio.wait_for(self._closing.wait(), wait)
                        if self._closing.is_set():
                            return
                elif not self._has_content():
                    # A step's `start-step` goes out with its first content, not alone: one
                    # round trip (and one wake-up of every reader) less before the first token,
                    # the latency a user feels. A model slow to start still shows it after
                    # `interval`.
                    self._content_arrived.clear()
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._content_arrived.wait(), self._interval)
                    if self._closing.is_set():
                        return
                batch, self._buffer = self._buffer, []
                # One statement (reserve, insert, NOTIFY): atomic on an autocommit
                # connection, without a BEGIN and a COMMIT round trip around it.
                async with self._db.connection() as conn:
                    await append(conn, self._turn_id, batch, self._fence)
                    if self._after_flush is not None:
                        await self._after_flush(conn)
                self._last_flush = time.monotonic()
                self._content_sent = self._content_sent or any(map(is_content_chunk, batch))
        except Exception as exc:
            # Surfaced to the producer by emit() and drain(), and only there: re-raised here,
            # it would also be the task's exception, which nobody retrieves when the producer
            # stops at emit() (Postgres gone, a stale attempt), so asyncio logged an ERROR
            # "Task exception was never retrieved" on top of the activity's own failure.
            self._error = exc
        except BaseException as exc:  # cancelled by abort(): the writer is being discarded
            self._error = exc
            raise

    async def let_first_content_out(self) -> None:
        """Let the batch that holds the step's first content start on its way now. A model
        that sent the whole step in one read (a fast or a cached one) is consumed without a
        pause, so without this all of it waited for the step's end and its transaction (what
        that cost: docs/benchmarks.md, "Figures behind code comments"). A model that streams
        pauses between reads anyway, and nothing changes for it."""
        if self._first_content_nudged or self._content_sent or not self._has_content():
            return
        self._first_content_nudged = True
        if self._task is not None and not self._task.done():
            await asyncio.sleep(0)

    def _has_content(self) -> bool:
        return any(map(is_content_chunk, self._buffer))

    async def drain(self) -> list[UIMessageChunk]:
        """Stop batching; wait for a batch in flight and return the chunks not yet written.
        The fence's claim has landed when it returns (`Fence.held`): what the caller writes
        next may go in a transaction."""
        self._closing.set()
        self._content_arrived.set()
        if self._task is not None:
            task, self._task = self._task, None
            with contextlib.suppress(Exception):
                await task  # its error, if any, is in self._error
        if self._error is not None:
            raise self._error
        await self._fence.held()  # a step that wrote nothing yet has not waited for it
        rest, self._buffer = self._buffer, []
        return rest

    async def abort(self) -> None:
        self._closing.set()
        self._content_arrived.set()
        if self._task is not None and not self._task.done():
            self._task.cancel()
            # We are discarding this writer: whatever its last batch raised no longer matters.
            with contextlib.suppress(BaseException):
                await self._task
        self._buffer = []
