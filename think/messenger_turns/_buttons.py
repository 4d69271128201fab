"""An approval decided in the chat: a press of the Approve or Deny button the delivery posted
(`a:<approval id>` / `d:<approval id>`) becomes the same decision as `POST
…/approvals/{approval_id}`: recorded in Postgres first (where two presses meet: the second is
answered "already decided"), then signalled to the turn's workflow; a parked action
(`approval="durable_pause"`) goes through `decide_parked_action` like HTTP's.

Approvers: the presser is `<messenger>:<platform user id>` (`telegram:12345`). An agent with
`Think.approvers` set accepts a press only from a name in it, beside its API keys' names.
"""

from __future__ import annotations

import logging

from temporalio.service import RPCError

from think.agent import Think
from think.messenger_turns._hub import MessengerHub
from think.messengers import InboundEvent, Messenger, Platform, PlatformError
from think.storage import TERMINAL_STATUSES, action_ledger, messenger_store, record_answer
from think.turns import approval_decided, approval_request, decide_parked_action
from think.workflows.inputs import ToolDecision
from think.workflows.names import APPROVE, turn_workflow_id

log = logging.getLogger("think.messengers")

ALREADY = "Already decided."


def approver_name(messenger: Messenger, user_id: str) -> str:
    """How a chat user is named among `Think.approvers`."""
    return f"{messenger.name}:{user_id}"


async def press(
    hub: MessengerHub,
    agent: type[Think],
    messenger: Messenger,
    platform: Platform,
    event: InboundEvent,
) -> str:
    """Decide the pressed approval; the note shown to the presser (also returned)."""
    assert event.button is not None
    approved = event.button.data.startswith("a:")
    approval_id = event.button.data[2:]
    note = await _decide(hub, agent, messenger, event, approval_id, approved)
    try:
        await platform.answer_button(event.button.press_id, note)
    except PlatformError as exc:
        log.warning("answering a button press failed: %s", exc)
    return note


async def _decide(
    hub: MessengerHub,
    agent: type[Think],
    messenger: Messenger,
    event: InboundEvent,
    approval_id: str,
    approved: bool,
) -> str:
    posted = await messenger_store.button_posted(hub.store.db, approval_id)
    if posted is None:
        return "This approval is unknown."
    principal = approver_name(messenger, event.author.id)
    if agent.approvers is not None and principal not in agent.approvers:
        return f"You may not decide this ({principal} is not among the approvers)."
    turn = await hub.store.get_turn(posted.turn_id)
    if turn is None:
        return "This approval's turn is gone."
    decision = ToolDecision(
        approval_id=approval_id,
        approved=approved,
        by=messenger.name,
        principal=principal,
    )
    verdict = "Approved." if approved else "Denied."
    if approval_request(turn, approval_id) is None:
        parked = await action_ledger.parked_action(hub.store.db, turn.tenant, approval_id)
        if parked is None or parked.status != "parked" or parked.decision is not None:
            return ALREADY
        won = await decide_parked_action(hub.store, hub.temporal, parked, decision)
        return verdict if won is not None else ALREADY
    if approval_decided(turn, approval_id) or turn.status in TERMINAL_STATUSES:
        return ALREADY
    async with hub.store.db.transaction() as conn:
        recorded = await record_answer(
            conn, turn.id, "approval", approval_id, decision.model_dump(mode="json")
        )
    if not recorded:
        return ALREADY
    handle = hub.temporal.get_workflow_handle(
        turn_workflow_id(turn.agent, turn.conversation_id, turn.id, tenant=turn.tenant)
    )
    try:
        await handle.signal(APPROVE, decision)
    except RPCError as exc:  # recorded: the workers' sweeper signals it again
        log.warning("signalling the approval to turn %s failed: %s", turn.id, exc)
    return verdict
