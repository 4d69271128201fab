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
    """Heartbeat every `interval` seconds, starting after the first interval.

    Every heartbeat is a write on the Temporal server, so an activity that finishes within a
    second (most model steps and tools) sends none: the heartbeat timeout (seconds) is what
    catches a dead worker, and a first beat after one interval is well inside it.
    """

    async def beat() -> None:
        while True:
            await asyncio.sleep(interval)
            activity.heartbeat()

    task = asyncio.create_task(beat())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
