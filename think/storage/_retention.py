"""What retention and erasure read and delete in Postgres, and a conversation's export.

The deleting itself goes through the existing paths: a conversation through the turns layer's
`delete_conversation` (which ends its turns and deletes its schedules first, then
`delete_conversation_rows`), a conversation's ended turns through `delete_turns(keep_usage=
True)`. What is here finds them, in batches (the oldest first), and deletes the few rows a
tenant owns outside any conversation.

- A turn record is *expired* when it ended and was submitted more than the retention ago.
- A conversation is *idle* when nothing of it was written since the cutoff: it was created
  before, no turn of it is active or was submitted or ended since, no message was added and
  no workspace file written since.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from think.storage._db import fetch_all
from think.storage._records import Conversation

if TYPE_CHECKING:
    from think.storage._store import Store

_COLUMNS = "c.uid, c.tenant, c.agent, c.id, c.created_at, c.active_leaf_id, c.metadata"

_EXPIRED_TURNS = """
    SELECT DISTINCT conversation_uid FROM (
        SELECT conversation_uid FROM turns
        WHERE agent = %(agent)s AND completed_at IS NOT NULL AND created_at < %(cutoff)s
        LIMIT %(limit)s
    ) AS t
"""

_IDLE = f"""
    SELECT {_COLUMNS} FROM conversations c
    WHERE c.agent = %(agent)s AND c.created_at < %(cutoff)s
      AND NOT EXISTS (
        SELECT 1 FROM turns t WHERE t.conversation_uid = c.uid
          AND (t.completed_at IS NULL OR t.created_at >= %(cutoff)s
               OR t.completed_at >= %(cutoff)s))
      AND NOT EXISTS (
        SELECT 1 FROM messages m WHERE m.conversation_uid = c.uid AND m.created_at >= %(cutoff)s)
      AND NOT EXISTS (
        SELECT 1 FROM workspace_files w
        WHERE w.conversation_uid = c.uid AND w.updated_at >= %(cutoff)s)
    ORDER BY c.created_at LIMIT %(limit)s
"""

_TENANT_CONVERSATIONS = f"""
    SELECT {_COLUMNS} FROM conversations c WHERE c.tenant = %(tenant)s
    ORDER BY c.created_at LIMIT %(limit)s
"""

# What a tenant owns outside its conversations: its workspace usage row (kept at zero by the
# triggers once its files are gone), its submission bucket, its streams' leases, and its
# action ledger (not tied to conversations: a deleted conversation's effects stay settled),
# and its messengers' rows (event ids, threads with their chat ids, deliveries, buttons).
_FORGET_TENANT = """
    WITH usage AS (DELETE FROM workspace_usage WHERE tenant = %(tenant)s),
    leases AS (DELETE FROM stream_leases WHERE tenant = %(tenant)s),
    actions AS (DELETE FROM action_ledger WHERE tenant = %(tenant)s),
    events AS (DELETE FROM messenger_events WHERE tenant = %(tenant)s),
    threads AS (DELETE FROM messenger_threads WHERE tenant = %(tenant)s),
    buttons AS (DELETE FROM messenger_buttons b USING messenger_deliveries d
                WHERE b.delivery_id = d.id AND d.tenant = %(tenant)s),
    deliveries AS (DELETE FROM messenger_deliveries WHERE tenant = %(tenant)s)
    DELETE FROM tenant_limits WHERE tenant = %(tenant)s
"""


async def conversations_with_expired_turns(
    store: Store, agent: str, cutoff: datetime, limit: int
) -> list[str]:
    """The conversations (uids) of `agent` holding ended turns submitted before `cutoff`,
    from a batch of at most `limit` such turns."""
    async with store.db.connection() as conn:
        rows = await fetch_all(
            conn, _EXPIRED_TURNS, {"agent": agent, "cutoff": cutoff, "limit": limit}
        )
    return [r["conversation_uid"] for r in rows]


async def idle_conversations(
    store: Store, agent: str, cutoff: datetime, limit: int
) -> list[Conversation]:
    """At most `limit` conversations of `agent` idle since `cutoff`, the oldest first."""
    async with store.db.connection() as conn:
        rows = await fetch_all(conn, _IDLE, {"agent": agent, "cutoff": cutoff, "limit": limit})
    return [Conversation.model_validate(r) for r in rows]


async def tenant_conversations(store: Store, tenant: str, limit: int) -> list[Conversation]:
    """At most `limit` of the tenant's conversations (any agent), the oldest first."""
    async with store.db.connection() as conn:
        rows = await fetch_all(conn, _TENANT_CONVERSATIONS, {"tenant": tenant, "limit": limit})
    return [Conversation.model_validate(r) for r in rows]


async def forget_tenant(store: Store, tenant: str) -> None:
    """Delete the rows the tenant owns outside its conversations (run once they are gone)."""
    async with store.db.transaction() as conn:
        await conn.execute(_FORGET_TENANT, {"tenant": tenant})


class ExportedMessage(BaseModel):
    """A node of the message tree, as stored: `parent_id` makes the tree."""

    id: str
    parent_id: str | None
    role: str
    parts: list[dict[str, Any]]
    metadata: dict[str, Any] | None
    turn_id: str | None
    created_at: datetime


class ExportedBlock(BaseModel):
    """A context (memory) block's content."""

    label: str
    content: str | None
    updated_at: datetime


class ExportedCompaction(BaseModel):
    """A summary standing in for a span of messages when the model reads the path."""

    first_message_id: str
    last_message_id: str
    summary: str
    trigger: str
    tokens_before: int
    tokens_after: int
    created_at: datetime


class ExportedRows(BaseModel):
    """What a conversation's export reads from its own tables (the turns and workspace are
    read through their usual views)."""

    messages: list[ExportedMessage]
    context_blocks: list[ExportedBlock]
    compactions: list[ExportedCompaction]
    config: dict[str, Any]
    system_prompt: str | None


async def export_rows(store: Store, conversation_uid: str) -> ExportedRows:
    """Every message of the conversation (all branches, in the order they were stored), its
    context blocks, summaries and configuration, in one snapshot."""
    params = {"c": conversation_uid}
    async with store.db.transaction() as conn:
        await conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
        messages = await fetch_all(
            conn,
            "SELECT id, parent_id, role, parts, metadata, turn_id, created_at FROM messages "
            "WHERE conversation_uid = %(c)s ORDER BY position",
            params,
        )
        blocks = await fetch_all(
            conn,
            "SELECT label, content, updated_at FROM context_blocks "
            "WHERE conversation_uid = %(c)s ORDER BY label",
            params,
        )
        compactions = await fetch_all(
            conn,
            "SELECT first_message_id, last_message_id, summary, trigger, tokens_before, "
            "tokens_after, created_at FROM compactions WHERE conversation_uid = %(c)s "
            "ORDER BY id",
            params,
        )
        own = await fetch_all(
            conn, "SELECT config, system_prompt FROM conversations WHERE uid = %(c)s", params
        )
    config = own[0] if own else {"config": {}, "system_prompt": None}
    return ExportedRows(
        messages=[ExportedMessage.model_validate(dict(m)) for m in messages],
        context_blocks=[ExportedBlock.model_validate(dict(b)) for b in blocks],
        compactions=[ExportedCompaction.model_validate(dict(c)) for c in compactions],
        config=config["config"] or {},
        system_prompt=config["system_prompt"],
    )
