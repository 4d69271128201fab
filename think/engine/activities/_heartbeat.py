"""Heartbeat a long activity from one place.

Cancellation and worker-loss detection reach an activity only through heartbeats, so any
activity that can block (a tool, a model call before its first token) runs inside this.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, AsyncIterator
from typing import TypeVar

from temporalio import activity

from think.exceptions import ModelError

_T = TypeVar("_T")


class StreamStalled(ModelError):
    """The model stream went silent for longer than `chat_stream_stall_timeout`."""

    def __init__(self, seconds: float) -> None:
        super().__init__(
            f"the model sent nothing for {seconds:g} s (chat_stream_stall_timeout)",
            retryable=True,
        )
        self.seconds = seconds


@contextlib.asynccontextmanager
async def heartbeating(interval: float = 1.0) -> AsyncIterator[None]:
    """Heartbeat every `interval` seconds, starting after the first interval.

    Every heartbeat is a write on the Temporal server, so an activity that finishes within a
    second (most model steps and tools) sends none: the heartbeat timeout (seconds) is what
    catches a dead worker, and a first beat after one interval is well inside it.
    """

    if activity.info().is_local:
        # A local activity has no heartbeat: its workflow task's timeout watches its worker.
        yield
        return

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


async def within_stall_timeout(
    events: AsyncIterator[_T], seconds: float | None
) -> AsyncGenerator[_T, None]:
    """Pass events through, failing (retryably) when the next one takes longer than `seconds`.
    None or 0 (or less) is no watchdog: the events pass however long they take.

    A stalled model stream keeps its activity alive and heartbeating, so Temporal's heartbeat
    timeout never fires for it: the step has to notice the silence itself.
    """
    limit = seconds if seconds is not None and seconds > 0 else None
    iterator = aiter(events)
    try:
        while True:
            try:
                async with asyncio.timeout(limit) as timer:
                    event = await anext(iterator)
            except StopAsyncIteration:
                return
            except TimeoutError:
                if limit is None or not timer.expired():
                    raise  # the stream's own, not the watchdog's
                raise StreamStalled(limit) from None
            yield event
    finally:
        close = getattr(iterator, "aclose", None)
        if close is not None:
            await close()
