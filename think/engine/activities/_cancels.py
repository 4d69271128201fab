"""A cancel that reaches a streaming model step at once, through Postgres.

Model steps run as local activities, inside their workflow's task, so Temporal's cancel reaches
one only when that task next completes (every few seconds while a step streams). `POST
…/cancel` therefore also notes the cancel on the turn row and announces it on
`think_cancel`; each worker holds one LISTEN connection for all its steps, and the step of
that turn is cancelled where it stands.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass

from think.storage import Store, fetch_one
from think.streaming import ChunkListener


@dataclass
class CancelRequest:
    requested: bool = False
    """Set before the step's task is cancelled: this cancellation is the user's."""


async def cancel_noted(store: Store, turn_id: str) -> bool:
    """Whether a cancel is noted on the turn and it has not ended (`Store.note_cancel`)."""
    async with store.db.connection() as conn:
        row = await fetch_one(
            conn,
            "SELECT 1 AS noted FROM turns WHERE id = %(id)s AND completed_at IS NULL "
            "AND error IS NOT NULL",
            {"id": turn_id},
        )
    return row is not None


@contextlib.asynccontextmanager
async def cancellable(
    store: Store,
    cancels: ChunkListener | None,
    turn_id: str,
    *,
    noted: bool = False,
    subscribed: asyncio.Event | None = None,
) -> AsyncIterator[CancelRequest]:
    """Cancel the current task when the turn's cancel is announced (or was `noted` already,
    before the step began). The caller tells its own cancel from others by `requested`.
    `subscribed`: the turn's subscription to `cancels`, opened before the step read the turn
    (`cancels.subscribe`), so that a cancel announced between that read and this stream is
    not missed; without it, one is opened here."""
    request = CancelRequest()
    task = asyncio.current_task()
    if cancels is None or task is None:
        yield request
        return

    def cancel() -> None:
        request.requested = True
        task.cancel()

    async def watch(event: asyncio.Event) -> None:
        while True:
            await event.wait()
            event.clear()
            # A listener that reconnects wakes everyone: look before cancelling.
            if await cancel_noted(store, turn_id):
                cancel()
                return

    with contextlib.ExitStack() as stack:
        if subscribed is None:
            subscribed = stack.enter_context(cancels.subscribe(turn_id))
        event = subscribed
        if noted:
            event.set()
        watcher = asyncio.create_task(watch(event))
        try:
            yield request
        finally:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher
            if request.requested:
                task.uncancel()
