"""The transactional steps of a turn's life: start it, and end it.

Both run inside a caller's transaction that holds the conversation's and the turn's row locks
(`Store.lock_queue_turn`), so they compose: the
first model step starts the turn in the same transaction that claims its stream, and the last
model step ends it in the same transaction that records the step. Each is a no-op when its
work is already done, which is what makes a retried activity harmless.
"""

from __future__ import annotations

import time
from contextvars import ContextVar
from typing import Any, cast

from think._messages import UIMessage
from think._protocol import FinishReason, JSONValue, UIMessageChunk, UIMessageJSON
from think.storage import (
    NOW,
    Conn,
    QueueLock,
    Store,
    StoredMessage,
    TurnRecord,
    TurnUsage,
    answer_parent,
    begin_turn,
    prepare_start,
)
from think.streaming import Fence, append

_ENDED_ALONE: ContextVar[str | None] = ContextVar("think_ended_alone", default=None)
"""The turn this activity ended with no turn queued behind it (`end_turn`)."""


def ended_alone(turn_id: str) -> bool:
    """Whether this activity ended `turn_id` and saw no turn behind it: then there is nobody to
    hand the queue to, and the read that would look (`hand_off`) is saved. Only this task's
    own `end_turn` counts (a context variable: a shielded task's does not reach here)."""
    return _ENDED_ALONE.get() == turn_id


async def start_turn(
    store: Store, conn: Conn, turn: TurnRecord, queue: QueueLock
) -> tuple[TurnRecord, list[StoredMessage]]:
    """Apply what the turn's `message_concurrency` does as it starts (merge the submissions
    waiting behind it, roll back, or skip a continuation with nothing to continue), append the
    user's messages under the active leaf (as it is now, when the turn runs, not when it was
    accepted), mark the turn running and open its stream with `start`. Returns the turn and
    the messages it stored; a skipped turn is returned ended (`skipped`)."""
    if turn.status != "pending":
        return turn, []
    active_leaf = queue.active_leaf_id
    runs, turn = await prepare_start(conn, turn)
    if not runs:
        return turn.model_copy(update={"status": "skipped"}), []
    if turn.request.rollback_of is not None:  # prepare_start may have moved the leaf back
        active_leaf = (await store.conversation_by_uid(conn, turn.conversation_uid)).active_leaf_id
    return await begin_turn(store, conn, turn, active_leaf)


async def end_turn(
    store: Store,
    conn: Conn,
    turn: TurnRecord,
    queue: QueueLock,
    *,
    status: str,
    message: UIMessageJSON,
    chunks: list[UIMessageChunk],
    fence: Fence | None = None,
    error: str | None = None,
    finish_reason: str = "stop",
    **columns: Any,
) -> list[StoredMessage]:
    """Store the assistant message, the final status and the stream's last chunks together,
    so a client never sees `finish` for a message that is not stored. Under the conversation's
    lock (`queue`), so the turn waiting behind this one is seen by whoever hands the queue on
    after the commit. Returns the message as stored (none when there is nothing to store)."""
    stored: list[StoredMessage] = []
    finishes = status in ("completed", "interrupted")
    if finishes:
        # What the turn spent (`messageMetadata.usage`, as the Turn shows it) goes on the
        # `finish` chunk and, as the AI SDK merges it there, on the stored message's metadata:
        # the message a client builds from the stream is the one stored.
        spent = TurnUsage.from_record(columns.get("usage", turn.usage))
        usage = cast(JSONValue, spent.model_dump(mode="json", exclude={"steps"}))
        # And which model gave the answer (a fallback chain's, or the last step's), and when.
        ended: dict[str, JSONValue] = {"usage": usage, "finishedAt": int(time.time() * 1000)}
        if spent.steps:
            ended["model"] = spent.steps[-1].model
        metadata = {**(message.get("metadata") or {}), **ended}
        message = cast(UIMessageJSON, {**message, "metadata": metadata})
    if finishes or message["parts"]:
        stored = await _store_answer(store, conn, turn, queue, message)
    if finishes:
        # An interrupted turn still has an answer (the terminal message): it finishes, with
        # the reason saying how. Errors and aborts end with their own chunk instead.
        # The reasons are the protocol's (`FinishReason`), as the model clients and the
        # workflow name them; the workflow's inputs carry them as strings.
        finish: UIMessageChunk = {
            "type": "finish",
            "finishReason": cast(FinishReason, finish_reason),
            "messageMetadata": ended,
        }
        chunks = [*chunks, finish]
    await append(
        conn,
        turn.id,
        chunks,
        fence,
        status=status,
        completed_at=NOW,
        error=error,
        message=message,
        **columns,
    )
    _ENDED_ALONE.set(None if queue.followers else turn.id)
    return stored


async def keep_partial(
    store: Store, turn_id: str, message: UIMessageJSON, fence: Fence | None = None
) -> bool:
    """Store a failing turn's partial answer before `on_chat_error` runs, as the spec has it
    ("the partial assistant message is persisted before this hook fires"), so the hook reads
    the conversation as the failure leaves it; `end_turn` then ends the turn, leaving the
    message as stored. In its own transaction, under the conversation's lock and the step's
    fence (a stale attempt stores nothing: `StaleAttempt`). False when the turn had ended."""
    if fence is not None:
        await fence.held()
    async with store.db.transaction() as conn:
        turn, queue = await store.lock_queue_turn(conn, turn_id)
        if turn.terminal:
            return False
        await append(conn, turn.id, [], fence, message=message)
        await _store_answer(store, conn, turn, queue, message)
    return True


async def _store_answer(
    store: Store, conn: Conn, turn: TurnRecord, queue: QueueLock, message: UIMessageJSON
) -> list[StoredMessage]:
    """The turn's answer into the tree, under its parent, as the active leaf (a second store
    of the same answer leaves it as it is)."""
    return await store.insert_messages(
        conn,
        turn.conversation_uid,
        [UIMessage.model_construct(**message)],
        parent_id=await answer_parent(conn, turn, queue),
        turn_id=turn.id,
        activate=True,
    )


ABANDONED = (
    "this turn's workflow ended without finishing it (terminated or failed in Temporal); "
    "the turn was closed so that the conversation goes on"
)


async def end_with_error(store: Store, turn_id: str, text: str) -> tuple[bool, TurnRecord]:
    """End a turn `error` with its draft as stored and `text`, no hook run, under the
    conversation's lock, so that the conversation goes on. Returns whether it ended it (False:
    the turn had ended already) and the turn as it then stands."""
    async with store.db.transaction() as conn:
        turn, queue = await store.lock_queue_turn(conn, turn_id)
        if turn.terminal:
            return False, turn
        message = turn.message or {"id": turn.message_id, "role": "assistant", "parts": []}
        await end_turn(
            store,
            conn,
            turn,
            queue,
            status="error",
            message=message,
            chunks=[{"type": "error", "errorText": text}],
            error=text,
        )
    return True, turn


async def end_abandoned(store: Store, turn_id: str) -> bool:
    """End a turn whose workflow closed without ending it (an operator terminated it, or it
    failed), as `error` with what it had: otherwise the conversation's queue would wait for it
    forever. False when the turn had ended after all."""
    ended, _ = await end_with_error(store, turn_id, ABANDONED)
    return ended
