"""Deciding a parked action (`@action(approval="durable_pause")`): the one path every door
takes (HTTP's approval route today; a messenger's button the same way).

The decision is recorded in the ledger first, where concurrent decisions meet: one statement
guarded by "still parked and undecided" picks the winner, and the others are told they lost.
The winner is then signalled to the action's workflow, which runs the action; should Temporal
be unreachable, the decision stays recorded and the workers' sweeper signals it again.
"""

from __future__ import annotations

import asyncio
import logging

from temporalio.client import Client
from temporalio.service import RPCError

from think.storage import Store, action_ledger
from think.storage.action_ledger import ActionRow
from think.workflows.inputs import ToolDecision
from think.workflows.names import APPROVE, parked_action_workflow_id

log = logging.getLogger("think.turns")


async def decide_parked_action(
    store: Store, temporal: Client, row: ActionRow, decision: ToolDecision
) -> ActionRow | None:
    """Record `decision` on the parked action `row` and signal its workflow; the row as
    decided, or None when another decision came first (or it is no longer parked)."""
    async with store.db.transaction() as conn:
        won = await action_ledger.record_decision(
            conn,
            row.id,
            decision.model_dump(mode="json"),
            decision.approved,
            decision.principal or decision.by,
        )
    if won is None:
        return None
    await signal_parked_decision(temporal, won, decision)
    return won


async def signal_parked_decision(temporal: Client, row: ActionRow, decision: ToolDecision) -> bool:
    """Send a recorded decision to the parked action's workflow; False when Temporal could
    not be reached (the sweeper sends it again)."""
    assert row.approval_id is not None
    handle = temporal.get_workflow_handle(parked_action_workflow_id(row.tenant, row.approval_id))
    try:
        await handle.signal(APPROVE, decision)
    except RPCError as exc:
        log.warning("signalling the decision on parked action %s failed: %s", row.id, exc)
        return False
    return True


async def parked_settled(store: Store, action_id: str, within: float) -> ActionRow | None:
    """The parked action once it has left `parked` (ran, failed, refused), waiting at most
    `within` seconds; None if it has not by then."""
    deadline = asyncio.get_running_loop().time() + within
    while True:
        row = await action_ledger.get_action(store.db, action_id)
        if row is not None and row.status not in ("parked", "pending"):
            return row
        if asyncio.get_running_loop().time() >= deadline:
            return None
        await asyncio.sleep(0.05)
