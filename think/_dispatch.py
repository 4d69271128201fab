"""Handing an accepted turn to its conversation's entity workflow.

Shared by the gateway (right after admission) and the workers' sweeper (for turns whose
gateway died between the Postgres commit and this call), so both speak to Temporal the same way.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from temporalio.client import Client, WithStartWorkflowOperation
from temporalio.common import SearchAttributePair, TypedSearchAttributes, WorkflowIDConflictPolicy
from temporalio.service import RPCError

from think.exceptions import ThinkError
from think.storage import TurnRecord
from think.workflows._inputs import ConversationInput, ConversationRef, SubmitTurn
from think.workflows._names import (
    AGENT_KEY,
    CONVERSATION_KEY,
    CONVERSATION_WORKFLOW,
    SUBMIT_UPDATE,
    conversation_workflow_id,
)

log = logging.getLogger("think.dispatch")


class DispatchFailed(ThinkError):
    """Temporal did not take the turn; it stays `pending` in Postgres and can be re-sent."""

    def __init__(self, message: str, turn_id: str | None = None) -> None:
        super().__init__(message)
        self.turn_id = turn_id


def submit_request(turn: TurnRecord) -> SubmitTurn:
    """The `submit` Update for a recorded turn: its id, and how it treats overlapping turns."""
    request = turn.request
    return SubmitTurn(
        turn_id=turn.id,
        # Regenerates are never subject to message_concurrency, whatever the record says.
        concurrency=None if request.regenerates else request.concurrency,
        debounce_seconds=request.debounce_seconds or 0.0,
        continuation=request.continuation,
    )


async def dispatch(client: Client, task_queue: str, turn: TurnRecord) -> None:
    """Submit the turn to its conversation's workflow, starting that workflow if needed.

    The update id is the turn id and the workflow keeps the ids it has seen, so sending the
    same turn twice queues it once.
    """
    ref = ConversationRef(
        tenant=turn.tenant,
        agent=turn.agent,
        conversation_id=turn.conversation_id,
        conversation_uid=turn.conversation_uid,
    )
    workflow_id = conversation_workflow_id(turn.tenant, turn.agent, turn.conversation_id)
    last: Exception | None = None
    for attempt in range(3):
        start: WithStartWorkflowOperation[Any, Any] = WithStartWorkflowOperation(
            CONVERSATION_WORKFLOW,
            ConversationInput(conversation=ref),
            id=workflow_id,
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            task_queue=task_queue,
            search_attributes=TypedSearchAttributes(
                [
                    SearchAttributePair(AGENT_KEY, turn.agent),
                    SearchAttributePair(CONVERSATION_KEY, turn.conversation_id),
                ]
            ),
            static_summary=f"conversation {turn.conversation_id} with {turn.agent}",
        )
        try:
            await client.execute_update_with_start_workflow(
                SUBMIT_UPDATE,
                submit_request(turn),
                start_workflow_operation=start,
                id=turn.id,
            )
            return
        except RPCError as exc:
            # The entity may have closed (idle) between our update and its acceptance;
            # update-with-start then starts a fresh run on the next try.
            log.warning("dispatching turn %s failed (attempt %d): %s", turn.id, attempt + 1, exc)
            last = exc
            await asyncio.sleep(0.1 * (attempt + 1))
        except Exception as exc:
            last = exc
            break
    raise DispatchFailed(f"turn {turn.id!r} could not be handed to Temporal: {last}", turn.id)
