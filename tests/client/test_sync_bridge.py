"""The sync client's bridge into its loop, when a Ctrl-C lands at the worst moment.

A KeyboardInterrupt is delivered between any two bytecodes of the main thread, so it can land
inside `call_soon_threadsafe` itself: after the callback is queued (the work starts, and nobody
waits for it) or before (it never starts, and nothing would ever settle the caller's wait).
Either way `run` must raise the interrupt only once the work has stopped, and must not hang.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from think.client._sync import _LoopThread


async def _nothing() -> None:
    return None


@pytest.fixture
def bridge() -> Iterator[_LoopThread]:
    loop_thread = _LoopThread(cleanup=_nothing)
    yield loop_thread
    loop_thread.stop()
    loop_thread.join()


def _interrupt_first_call(bridge: _LoopThread, *, after_queueing: bool) -> None:
    """Make the next `call_soon_threadsafe` raise KeyboardInterrupt, after or before it queues."""
    loop = bridge._loop
    real: Callable[..., Any] = loop.call_soon_threadsafe
    calls: list[int] = []

    def interrupted(callback: Callable[..., object], *args: object) -> Any:
        calls.append(1)
        if len(calls) > 1:
            return real(callback, *args)
        if after_queueing:
            real(callback, *args)
        raise KeyboardInterrupt

    loop.call_soon_threadsafe = interrupted  # type: ignore[method-assign]


def test_an_interrupt_after_the_work_was_queued_stops_the_work_before_it_is_raised(
    bridge: _LoopThread,
) -> None:
    work = asyncio.sleep(3600)
    _interrupt_first_call(bridge, after_queueing=True)
    with pytest.raises(KeyboardInterrupt):
        bridge.run(work)
    # Stopped on the loop (cancelled where it waited, or before its first step) by the time
    # the caller sees the interrupt, and the bridge goes on.
    assert inspect.getcoroutinestate(work) == inspect.CORO_CLOSED
    assert bridge.run(_answer(7)) == 7


def test_an_interrupt_before_the_work_was_queued_raises_at_once_and_never_runs_it(
    bridge: _LoopThread,
) -> None:
    work = _answer(0)
    _interrupt_first_call(bridge, after_queueing=False)
    with pytest.raises(KeyboardInterrupt):
        bridge.run(work)  # a hang here is the bug: nothing would settle the caller's wait
    assert inspect.getcoroutinestate(work) == inspect.CORO_CLOSED  # closed, never run
    assert bridge.run(_answer(8)) == 8


async def _answer(value: int) -> int:
    return value
