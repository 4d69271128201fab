"""Heartbeat a long activity from one place.

Cancellation and worker-loss detection reach an activity only through heartbeats, so any
activity that can block (a tool, a model call before its first token) runs inside this.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from temporalio import activity


@contextlib.asynccontextmanager
async def heartbeating(interval: float = 1.0) -> AsyncIterator[None]:
    async def beat() -> None:
        while True:
            activity.heartbeat()
            await asyncio.sleep(interval)

    task = asyncio.create_task(beat())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
