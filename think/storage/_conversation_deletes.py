"""Clearing a conversation and deleting one, in Postgres: the steps that take the
conversation's row lock (the queue's, which admission takes too). Ending its turns before, and
deleting its schedules, is the turns layer's (`think.turns._conversation_lifecycle`); the last
steps here refuse to run while a turn of the conversation is active, because that turn's
workflow would go on writing to rows cleared or deleted under it.

- `skip_queue`: its waiting submissions end `skipped` (`think.storage._queue.skip_waiting`).
- `clear_history`: the ended submission records go with their streams, except the ones the
  clear itself ended, so that whoever waits for or follows one of those learns how it ended
  (`skipped`, `aborted`) instead of finding nothing; the history stays in the tree, off the
  active path (`"keep"`), or goes (`"delete"`); the frozen system prompt is dropped, to be
  built again by the next step.
- `delete_conversation_rows`: the conversation's row, and with it every row that names it
  (each table's `conversation_uid` is `ON DELETE CASCADE`; the workspace's usage row is
  kept in step by a trigger, migration 0014), and the stream chunks of its turns, which name
  only their turn.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING, Literal

from think.exceptions import UserError
from think.storage._db import Conn, fetch_one
from think.storage._frozen_prompt import clear_system_prompt
from think.storage._queue import skip_waiting
from think.storage._records import Conversation

if TYPE_CHECKING:
    from think.storage._store import Store

ClearHistory = Literal["keep", "delete"]
"""What clearing a conversation does to its messages (`Think.clear_history`)."""
CLEAR_HISTORY: tuple[ClearHistory, ...] = ("keep", "delete")


class ConversationNotFound(UserError):
    """The conversation is gone: deleted while it was being cleared or deleted."""

    def __init__(self, conversation_id: str) -> None:
        super().__init__(f"conversation {conversation_id!r} does not exist (it was deleted)")
        self.conversation_id = conversation_id


class ConversationStillActive(UserError):
    """New turns kept starting while the conversation's turns were being ended."""

    def __init__(self, conversation_id: str, action: str) -> None:
        super().__init__(
            f"conversation {conversation_id!r} was not {action}: new submissions kept arriving "
            f"while its turns were being ended; stop whatever submits to it, then try again"
        )
        self.conversation_id = conversation_id


_LOCK = "SELECT uid FROM conversations WHERE uid = %(c)s FOR UPDATE"
_ACTIVE = "SELECT 1 AS found FROM turns WHERE conversation_uid = %(c)s AND completed_at IS NULL"

_DROP_ENDED_TURNS = """
    WITH dropped AS (
        DELETE FROM turns WHERE conversation_uid = %(c)s AND NOT (id = ANY(%(kept)s::text[]))
        RETURNING id
    )
    DELETE FROM stream_chunks WHERE turn_id IN (SELECT id FROM dropped)
"""

_DROP_HISTORY = """
    WITH summaries AS (DELETE FROM compactions WHERE conversation_uid = %(c)s)
    DELETE FROM messages WHERE conversation_uid = %(c)s
"""

# The records the clear ended stay, but not their words: what was asked (`request`), answered
# (`message`, `output`, and the model's `checkpoints`) and decided (`turn_answers`), and their
# streams but for the chunk that ends them.
_FORGET_KEPT_TURNS = """
    WITH answers AS (DELETE FROM turn_answers WHERE turn_id = ANY(%(kept)s::text[])),
    chunks AS (
        DELETE FROM stream_chunks s WHERE s.turn_id = ANY(%(kept)s::text[])
          AND s.seq < (SELECT max(seq) FROM stream_chunks WHERE turn_id = s.turn_id)
    )
    UPDATE turns SET request = jsonb_build_object('messages', '[]'::jsonb), message = NULL,
                     output = NULL, checkpoints = '{}'
    WHERE conversation_uid = %(c)s AND id = ANY(%(kept)s::text[])
"""

_DETACH = """
    UPDATE conversations SET active_leaf_id = NULL,
                             messages_revision = messages_revision + %(bump)s
    WHERE uid = %(c)s
"""


async def skip_queue(store: Store, conversation_uid: str, reason: str) -> list[str]:
    """End the conversation's waiting submissions `skipped`, with `reason`, under its lock;
    the ids it skipped (none when the conversation is gone)."""
    async with store.db.transaction() as conn:
        if not await _locked(conn, conversation_uid):
            return []
        return await skip_waiting(conn, conversation_uid, reason)


async def clear_history(
    store: Store,
    conversation: Conversation,
    history: ClearHistory,
    *,
    kept: Collection[str] = (),
) -> Conversation | None:
    """Clear the conversation in one transaction: drop its ended turns and their streams (not
    those in `kept`, the ones the clear itself ended), detach its history from the active path
    (`"keep"`: the next turn starts a new root, while search and the tree still find the old
    messages) or delete it with its summaries (`"delete"`, which also takes the words out of
    the `kept` records), and drop the frozen system prompt. Returns the conversation as it now
    stands; None, having changed nothing, while a turn of it is active (the caller ends it and
    asks again). Raises `ConversationNotFound` when it was deleted meanwhile."""
    if history not in CLEAR_HISTORY:
        raise UserError(f"clear_history must be 'keep' or 'delete', not {history!r}")
    uid = conversation.uid
    params = {"c": uid, "kept": list(kept)}
    async with store.db.transaction() as conn:
        if not await _locked(conn, uid):
            raise ConversationNotFound(conversation.id)
        if await fetch_one(conn, _ACTIVE, params) is not None:
            return None
        await conn.execute(_DROP_ENDED_TURNS, params)
        if history == "delete":
            await conn.execute(_DROP_HISTORY, params)
            if kept:
                await conn.execute(_FORGET_KEPT_TURNS, params)
        # A deleted message's id may come back (a client's own ids): a worker's cached path
        # (`PathCache`), keyed by message id, must not take it for the old one.
        await conn.execute(_DETACH, {"c": uid, "bump": int(history == "delete")})
        await clear_system_prompt(conn, uid)
        return await store.conversation_by_uid(conn, uid)


async def delete_conversation_rows(store: Store, conversation_uid: str) -> bool:
    """Delete the conversation and everything stored of it, in one transaction. False, having
    deleted nothing, while a turn of it is active (the caller ends it and asks again); True
    once it is gone (or was already)."""
    params = {"c": conversation_uid}
    async with store.db.transaction() as conn:
        if not await _locked(conn, conversation_uid):
            return True
        if await fetch_one(conn, _ACTIVE, params) is not None:
            return False
        await conn.execute(
            "DELETE FROM stream_chunks WHERE turn_id IN "
            "(SELECT id FROM turns WHERE conversation_uid = %(c)s)",
            params,
        )
        await conn.execute("DELETE FROM conversations WHERE uid = %(c)s", params)
    return True


async def _locked(conn: Conn, conversation_uid: str) -> bool:
    """Take the conversation's row lock (the one admission takes, `lock_queue`): no turn can
    be admitted to it until this transaction ends. False when it does not exist."""
    return await fetch_one(conn, _LOCK, {"c": conversation_uid}) is not None
