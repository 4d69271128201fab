"""Waiting for a turn: until it settles (terminal, or paused for a person or a client) or
another condition holds, woken by its chunks' announcements. The gateway's `mode="wait"`, the
Python turn API's `wait()` and the decision routes' short wait all wait here."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

from think.exceptions import UserError
from think.storage import PAUSED_STATUSES, TERMINAL_STATUSES, Store, TurnRecord
from think.streaming import ChunkListener

# How often a wait (and the replay loop, `think.turns._follow`) looks again without a NOTIFY:
# one may be lost while the listener reconnects.
RECHECK_EVERY = 5.0


def settled(turn: TurnRecord) -> bool:
    """Terminal, or paused for a person or a client: what a waiting caller returns on."""
    return turn.status in TERMINAL_STATUSES or turn.status in PAUSED_STATUSES


async def wait_for_turn(
    store: Store,
    listener: ChunkListener,
    turn_id: str,
    wait_timeout: float | None,
    until: Callable[[TurnRecord], bool] = settled,
) -> TurnRecord:
    """The turn once `until` holds (by default: terminal or paused for a person), or as it
    stands after `wait_timeout` seconds (None: no limit)."""
    loop = asyncio.get_running_loop()
    deadline = None if wait_timeout is None else loop.time() + wait_timeout
    # The default waits for a status (terminal or paused), announced on its own; any other
    # condition may hang on the message, which changes with the turn's chunks.
    with listener.subscribe(turn_id, status_only=until is settled) as event:
        while True:
            event.clear()
            current = await store.get_turn(turn_id)
            if current is None:
                raise UserError(f"turn {turn_id!r} does not exist")
            if until(current):
                return current
            left = RECHECK_EVERY if deadline is None else deadline - loop.time()
            if left <= 0:
                return current
            # Wake on chunks; re-check at least every few seconds in case a NOTIFY was
            # missed while the listener reconnected.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(event.wait(), timeout=min(left, RECHECK_EVERY))
