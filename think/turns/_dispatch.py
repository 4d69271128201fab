"""Starting a conversation's running turn on Temporal: the one way a turn workflow starts.

A conversation's queue lives in Postgres (`turns.seq`, under the conversation's row lock); its
running turn is the first active one. Whoever changes who that is — admission, the activity
that ends a turn, a cancel of a queued turn, the workers' sweeper — calls `hand_off` after its
commit, which starts the running turn's workflow if it has not started. Starting is idempotent
(the workflow id is the turn's, and a duplicate is refused), so any of them may do it twice.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from temporalio.client import Client
from temporalio.common import (
    SearchAttributePair,
    TypedSearchAttributes,
    WorkflowIDConflictPolicy,
    WorkflowIDReusePolicy,
)
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError

from think.exceptions import ThinkError
from think.storage import Store, TurnRecord, queue_head
from think.workflows._inputs import ConversationRef, TurnInput
from think.workflows._names import (
    AGENT_KEY,
    CONVERSATION_KEY,
    TENANT_KEY,
    TURN_STATUS_KEY,
    TURN_WORKFLOW,
    turn_workflow_id,
)

log = logging.getLogger("think.dispatch")

TASK_TIMEOUT = timedelta(seconds=5)
"""A turn's workflow-task timeout. Model steps run as local activities inside a workflow task,
so this is how soon a step whose worker died is retried elsewhere (the SDK keeps a live task
open by completing it every 80% of this)."""


class DispatchFailed(ThinkError):
    """Temporal did not take the turn; it stays `pending` in Postgres and can be re-sent."""

    def __init__(self, message: str, turn_id: str | None = None) -> None:
        super().__init__(message)
        self.turn_id = turn_id


def turn_input(turn: TurnRecord) -> TurnInput:
    request = turn.request
    debounce = request.debounce_seconds or 0.0
    return TurnInput(
        conversation=ConversationRef(
            tenant=turn.tenant,
            agent=turn.agent,
            conversation_id=turn.conversation_id,
            conversation_uid=turn.conversation_uid,
        ),
        turn_id=turn.id,
        debounce_seconds=debounce if request.concurrency == "debounce" else 0.0,
    )


async def start_turn_workflow(client: Client, task_queue: str, turn: TurnRecord) -> None:
    """Start the turn's workflow; a turn whose workflow exists (running or closed) is left as
    it is. Raises `DispatchFailed` when Temporal cannot be reached."""
    try:
        await client.start_workflow(
            TURN_WORKFLOW,
            turn_input(turn),
            id=turn_workflow_id(turn.agent, turn.conversation_id, turn.id, tenant=turn.tenant),
            task_queue=task_queue,
            id_conflict_policy=WorkflowIDConflictPolicy.FAIL,
            id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
            task_timeout=TASK_TIMEOUT,
            search_attributes=TypedSearchAttributes(
                [
                    SearchAttributePair(TENANT_KEY, turn.tenant),
                    SearchAttributePair(AGENT_KEY, turn.agent),
                    SearchAttributePair(CONVERSATION_KEY, turn.conversation_id),
                    # Set at start rather than upserted by the turn: one event less per turn.
                    SearchAttributePair(TURN_STATUS_KEY, "running"),
                ]
            ),
            static_summary=f"{turn.agent} turn in conversation {turn.conversation_id}",
        )
    except WorkflowAlreadyStartedError:
        return
    except RPCError as exc:
        raise DispatchFailed(
            f"turn {turn.id!r} could not be handed to Temporal: {exc}", turn.id
        ) from exc


async def hand_off(store: Store, client: Client, task_queue: str, turn_id: str) -> None:
    """Start the running turn of `turn_id`'s conversation (that turn itself, or, once it has
    ended, the one behind it), if it is waiting for its workflow."""
    async with store.db.connection() as conn:
        head = await queue_head(conn, turn_id)
    if head is not None and head.status == "pending":
        await start_turn_workflow(client, task_queue, head)
