"""Clearing a conversation (Think's `chat-clear`) and deleting one: one implementation behind
both doors, the gateway's routes (`POST …/clear`, `DELETE …/conversations/{cid}`) and
`ConversationState.clear()` / `delete()`.

Both end the conversation's turns first, because a turn's workflow writes to the
conversation until it closes: its waiting submissions are skipped (under the conversation's
lock, so that none of them starts), the running or paused turn is cancelled as
`POST …/turns/{id}/cancel` does (its partial answer kept), and the workflow of each, then the
after-turn workflow it may have started (`on_chat_response`, compaction), is waited for until
it closes; one still running after `SETTLE_TIMEOUT` (a stuck worker: a cancelled turn closes
within a second) is terminated, so that nothing is left wedged. Only then does the storage
step run, in one transaction under the conversation's lock, which refuses while a turn is
active: a submission admitted in between is ended the same way and the step asked again, up to
`ROUNDS` times (then `ConversationStillActive`, a 409).

Deleting also deletes the conversation's schedules, first, so that no occurrence submits to it
meanwhile. What neither touches: the conversations of its sub-agents (`lead.<cid>.research`),
which are conversations of their own, and the turns' workflow histories in Temporal, which
hold ids rather than content and go with Temporal's retention.
"""

from __future__ import annotations

import asyncio
import logging

from temporalio.client import Client, WorkflowFailureError
from temporalio.service import RPCError, RPCStatusCode

from think.agent import Think, bind_config
from think.schedules import delete_conversation_schedules
from think.storage import (
    ACTIVE_STATUSES,
    Conversation,
    ConversationStillActive,
    Store,
    clear_history,
    conversation_config,
    delete_conversation_rows,
    skip_queue,
)
from think.turns._cancelling import cancel_turn
from think.workflows.names import after_turn_workflow_id, turn_workflow_id

log = logging.getLogger("think.turns")

SETTLE_TIMEOUT = 15.0
"""Seconds a turn's workflow (and then its after-turn workflow) may take to close once its turn
was ended, before it is terminated."""
ROUNDS = 3
"""How often the turns are ended and the storage step asked, while new turns keep starting."""
CLEARED = "the conversation was cleared"
DELETED = "the conversation was deleted"


async def clear_conversation(
    store: Store, temporal: Client, task_queue: str, agent: type[Think], conversation: Conversation
) -> Conversation:
    """Clear the conversation: its waiting submissions end `skipped` and its running or paused
    turn is cancelled (their records stay, saying so), the records of its other ended turns go
    with their streams, its history is kept off the active path or deleted
    (`agent.clear_history`), and its frozen system prompt is built again by the next step. Its
    configuration, workspace, memory blocks, MCP servers and schedules stay. Returns it as it
    now stands. Raises `ConversationStillActive` or `ConversationNotFound`."""
    ended: set[str] = set()
    for _ in range(ROUNDS):
        ended.update(await _end_turns(store, temporal, task_queue, conversation, CLEARED))
        cleared = await clear_history(store, conversation, agent.clear_history, kept=ended)
        if cleared is not None:
            return cleared
    raise ConversationStillActive(conversation.id, "cleared")


async def delete_conversation(
    store: Store, temporal: Client, task_queue: str, agent: type[Think], conversation: Conversation
) -> None:
    """Delete the conversation and everything of it: its schedules, then its turns (ended as a
    clear ends them), then every row stored of it, its workspace's files included. A later
    submission to the same id starts a new, empty conversation. Raises
    `ConversationStillActive`."""
    await _delete_schedules(store, temporal, task_queue, agent, conversation)
    for _ in range(ROUNDS):
        await _end_turns(store, temporal, task_queue, conversation, DELETED)
        if await delete_conversation_rows(store, conversation.uid):
            return
    raise ConversationStillActive(conversation.id, "deleted")


async def _end_turns(
    store: Store, temporal: Client, task_queue: str, conversation: Conversation, reason: str
) -> list[str]:
    """End every active turn of the conversation (the waiting ones skipped, the others
    cancelled, with `reason`) and wait until their workflows have closed; the ids it ended."""
    ended = await skip_queue(store, conversation.uid, reason)
    active = await store.list_turns(conversation.uid, status=sorted(ACTIVE_STATUSES))
    for turn in active:
        await cancel_turn(store, temporal, task_queue, turn, reason)
        ended.append(turn.id)
    await asyncio.gather(*(_closed(temporal, conversation, turn_id) for turn_id in ended))
    return ended


async def _closed(temporal: Client, conversation: Conversation, turn_id: str) -> None:
    """Until the turn's workflow has closed, then the after-turn workflow it starts as it
    ends (a skipped turn's workflow was never started, nor its after-turn one, mostly)."""
    turn_workflow = turn_workflow_id(
        conversation.agent, conversation.id, turn_id, tenant=conversation.tenant
    )
    for workflow_id in (turn_workflow, after_turn_workflow_id(turn_workflow)):
        handle = temporal.get_workflow_handle(workflow_id)
        try:
            await asyncio.wait_for(handle.result(), SETTLE_TIMEOUT)
        except WorkflowFailureError:
            pass  # failed, cancelled or terminated: closed all the same
        except RPCError as exc:
            if exc.status != RPCStatusCode.NOT_FOUND:
                raise
            # Never started: nothing runs.
        except TimeoutError:
            log.warning(
                "workflow %s was still running %.0f s after its turn was ended; terminating it",
                workflow_id,
                SETTLE_TIMEOUT,
            )
            try:
                await handle.terminate(reason="its conversation was cleared or deleted")
            except RPCError as exc:
                log.debug("terminate of %s: %s", workflow_id, exc)  # it closed meanwhile


async def _delete_schedules(
    store: Store, temporal: Client, task_queue: str, agent: type[Think], conversation: Conversation
) -> None:
    """Delete the conversation's schedules, with the agent bound to its configuration (a
    conversation-scope agent declares its tasks from it)."""
    bound = agent()
    async with store.db.connection() as conn:
        bind_config(bound, await conversation_config(conn, conversation.uid))
    await delete_conversation_schedules(
        temporal, task_queue, bound, conversation.tenant, conversation.id
    )
