"""Forking a conversation at a message (LangGraph's thread copy): a new conversation of the
same tenant and agent whose history is a copy of the path from the root to that message, in
one transaction.

What is copied: the path's messages (their ids, parts, metadata and times; not the turns that
wrote them, which stay the original's), the summaries that stand in for spans of that path
(so the model reads the fork as it read the original), and the conversation's configuration
(`configure()`). What is not: other branches, turns and their streams, the workspace, memory
blocks (their content is the original's now, not as of the message), MCP servers added to
the conversation, schedules, and the frozen system prompt (the fork's first step builds its
own).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from think.exceptions import UserError
from think.storage._db import Conn, fetch_all
from think.storage._records import Conversation

if TYPE_CHECKING:
    from think.storage._store import Store


class ForkTargetExists(UserError):
    """The id asked for the fork names a conversation that exists already."""

    def __init__(self, conversation_id: str) -> None:
        super().__init__(
            f"conversation {conversation_id!r} exists already: fork into a new id, or leave "
            "`id` out to get one"
        )
        self.conversation_id = conversation_id


class ForkPointNotFound(UserError):
    """The message to fork at is not in the conversation."""

    def __init__(self, message_id: str, conversation_id: str) -> None:
        super().__init__(f"message {message_id!r} is not in conversation {conversation_id!r}")
        self.message_id = message_id


_COPY_PATH = """
    WITH RECURSIVE path AS (
        SELECT id, parent_id FROM messages WHERE conversation_uid = %(src)s AND id = %(leaf)s
      UNION ALL
        SELECT m.id, m.parent_id
        FROM messages m JOIN path p ON m.conversation_uid = %(src)s AND m.id = p.parent_id
    )
    INSERT INTO messages (conversation_uid, id, parent_id, role, parts, metadata, turn_id,
                          created_at, text_content, byte_size)
    SELECT %(dst)s, m.id, m.parent_id, m.role, m.parts, m.metadata, NULL, m.created_at,
           m.text_content, m.byte_size
    FROM path p JOIN messages m ON m.conversation_uid = %(src)s AND m.id = p.id
    ORDER BY m.position
    RETURNING id
"""

_COPY_SUMMARIES = """
    INSERT INTO compactions (conversation_uid, first_message_id, last_message_id, summary,
                             tokens_before, tokens_after, trigger, turn_id, created_at)
    SELECT %(dst)s, first_message_id, last_message_id, summary, tokens_before, tokens_after,
           trigger, NULL, created_at
    FROM compactions
    WHERE conversation_uid = %(src)s AND first_message_id = ANY(%(ids)s)
      AND last_message_id = ANY(%(ids)s)
    ORDER BY id
"""

_COPY_CONFIG = """
    UPDATE conversations d SET config = s.config, active_leaf_id = %(leaf)s
    FROM conversations s WHERE s.uid = %(src)s AND d.uid = %(dst)s
"""


async def copy_path(conn: Conn, source_uid: str, target_uid: str, message_id: str) -> int:
    """Copy the path from the root to `message_id` of conversation `source_uid` into the new,
    empty conversation `target_uid`, with the summaries over it and the source's
    configuration, and make `message_id` its active leaf. Returns how many messages it copied
    (0: `message_id` is not in the source, and nothing was written)."""
    params = {"src": source_uid, "dst": target_uid, "leaf": message_id}
    copied = [str(row["id"]) for row in await fetch_all(conn, _COPY_PATH, params)]
    if not copied:
        return 0
    await conn.execute(_COPY_SUMMARIES, {**params, "ids": copied})
    await conn.execute(_COPY_CONFIG, params)
    return len(copied)


async def fork_conversation(
    store: Store,
    source: Conversation,
    *,
    message_id: str,
    conversation_id: str,
    metadata: dict[str, Any] | None = None,
) -> Conversation:
    """A new conversation `conversation_id` of `source`'s tenant and agent, holding the path
    of `source` from its root to `message_id` (`copy_path`), all in one transaction: a fork
    that cannot be made leaves nothing behind. Raises `ForkTargetExists` or
    `ForkPointNotFound`."""
    async with store.db.transaction() as conn:
        target, created = await store.ensure_conversation(
            conn,
            tenant=source.tenant,
            agent=source.agent,
            conversation_id=conversation_id,
            metadata=metadata,
        )
        if not created:
            raise ForkTargetExists(conversation_id)
        if not await copy_path(conn, source.uid, target.uid, message_id):
            raise ForkPointNotFound(message_id, source.id)  # rolls the new conversation back
        return await store.conversation_by_uid(conn, target.uid)
