"""Cancelling a turn: aborted at once when none of its steps has begun, else told through
Postgres (`NOTIFY think_cancel`) to the step streaming it, and its workflow cancelled."""

from __future__ import annotations

import logging

from temporalio.client import Client
from temporalio.service import RPCError

from think.storage import TERMINAL_STATUSES, Store, TurnRecord
from think.streaming import CANCEL_CHANNEL, append
from think.turns._dispatch import hand_off
from think.workflows.names import turn_workflow_id

log = logging.getLogger("think.admission")


async def cancel_turn(
    store: Store, temporal: Client, task_queue: str, turn: TurnRecord, reason: str
) -> bool:
    """Cancel a turn; False when it had already ended (nothing changes then).

    A turn none of whose steps has begun is aborted right here, before it ever calls the model
    (a queued one before it appends its user message), and the turn behind it (if this one was
    running) is started. A
    running one is told through Postgres (`NOTIFY think_cancel`), which reaches the model
    step streaming it at once; the step stores the partial answer and ends the stream with
    `abort`. Its workflow is cancelled too, for a turn paused between steps.
    """
    if turn.status in TERMINAL_STATUSES:
        return False
    async with store.db.transaction() as conn:
        aborted = await store.abort_if_unbegun(conn, turn, reason)
        if aborted:
            await append(conn, turn.id, [{"type": "abort", "reason": reason}])
        else:
            await store.note_cancel(conn, turn.id, reason)
            await conn.execute(
                "SELECT pg_notify(%(channel)s, %(turn)s)",
                {"channel": CANCEL_CHANNEL, "turn": turn.id},
            )
    if aborted:
        await hand_off(store, temporal, task_queue, turn.id)
    handle = temporal.get_workflow_handle(
        turn_workflow_id(turn.agent, turn.conversation_id, turn.id, tenant=turn.tenant)
    )
    try:
        await handle.cancel()
    except RPCError as exc:
        # Never started (it was waiting), or finished between our read and the cancel.
        log.debug("cancel of turn %s: %s", turn.id, exc)
    return True
