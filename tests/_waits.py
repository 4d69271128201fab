"""Waiting in tests on a condition, never for a fixed time: a sleep long enough on a quiet
laptop is too short on a loaded CI machine, and wastes the difference everywhere else."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")


async def eventually(
    check: Callable[[], Awaitable[T | None]], within: float = 20.0, every: float = 0.1
) -> T:
    """`check()`'s first truthy answer, polled every `every` seconds; an AssertionError
    with the last answer once `within` seconds have passed without one."""
    deadline = time.monotonic() + within
    while True:
        found = await check()
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {within}s (last answer {found!r})")
        await asyncio.sleep(every)


async def now(value: T) -> T:
    """A value already known, as the awaitable `eventually` polls: `eventually(lambda:
    now(connection.closed))` re-reads `connection.closed` at every poll."""
    return value
