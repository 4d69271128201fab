"""Waiting for a turn: until it settles (terminal, or paused for a person or a client) or
another condition holds, woken by its chunks' announcements. The gateway's `mode="wait"`, the
Python turn API's `wait()` and the decision routes' short wait all wait here."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass

from think.exceptions import UserError
from think.storage import (
    ACTIVE_STATUSES,
    PAUSED_STATUSES,
    TERMINAL_STATUSES,
    Store,
    TurnRecord,
    queue_head,
)
from think.streaming import ChunkListener

# How often a wait (and the replay loop, `think.turns._follow`) looks again without a NOTIFY:
# one may be lost while the listener reconnects.
RECHECK_EVERY = 5.0
HEAD_CHECK_EVERY = 1.0
"""Seconds between looks at the turn ahead while a waited-for turn is pending."""


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


@dataclass(frozen=True)
class Waited:
    """What a wait for a turn's answer ended with: the turn as it stands, and the turn ahead
    of it when that is why the wait ended (`queued_behind`: paused for a person)."""

    turn: TurnRecord
    queued_behind: TurnRecord | None = None


async def wait_for_answer(
    store: Store,
    listener: ChunkListener,
    turn_id: str,
    wait_timeout: float | None,
    *,
    queued: bool = True,
) -> Waited:
    """Until the turn is terminal or paused for a person, or `wait_timeout` passes (None: no
    limit); and the turn ahead of it, when it is the reason the wait ended. Every door's wait
    for an answer (HTTP's wait mode, `run_turn(mode="wait")`, `result`).

    A turn queued behind one that waits for a person cannot start before someone decides,
    which may take days: such a wait answers at once, with the turn as it stands (pending)
    and the paused turn that holds it, instead of hanging for the whole `wait_timeout`.
    A turn its admission started (`queued=False`) is at the head of its queue, so nothing can
    hold it: it is only waited for, with no look at the queue.
    """
    if not queued:
        return Waited(await wait_for_turn(store, listener, turn_id, wait_timeout))
    loop = asyncio.get_running_loop()
    deadline = None if wait_timeout is None else loop.time() + wait_timeout
    step = 0.0  # the first look is immediate
    while True:
        left = step if deadline is None else max(0.0, min(deadline - loop.time(), step))
        current = await wait_for_turn(store, listener, turn_id, left)
        if settled(current) or (deadline is not None and loop.time() >= deadline):
            return Waited(current)
        if current.status == "pending":
            async with store.db.connection() as conn:
                head = await queue_head(conn, turn_id)
            if head is not None and head.id != turn_id and head.status in PAUSED_STATUSES:
                return Waited(current, queued_behind=head)
        step = HEAD_CHECK_EVERY


def ended(turn: TurnRecord) -> bool:
    return turn.status in TERMINAL_STATUSES


async def wait_until_idle(
    store: Store, listener: ChunkListener, conversation_uid: str, wait_timeout: float | None
) -> bool:
    """Whether the conversation came to have no queued, running or paused turn within
    `wait_timeout` seconds (None: no limit). Waits on its oldest active turn, the one the others
    queue behind, and looks again when it ends: a turn submitted meanwhile is waited for too."""
    loop = asyncio.get_running_loop()
    deadline = None if wait_timeout is None else loop.time() + wait_timeout
    while True:
        active = await store.list_turns(conversation_uid, status=sorted(ACTIVE_STATUSES))
        if not active:
            return True
        left = None if deadline is None else deadline - loop.time()
        if left is not None and left <= 0:
            return False
        await wait_for_turn(store, listener, active[-1].id, left, until=ended)
