"""The message tree: appending without a turn, regenerating, siblings and switching branches.

A conversation's messages form a tree (`messages.parent_id`), and `conversations.active_leaf_id`
names the leaf of the path that is shown and that the next turn answers. Nothing here deletes
or rewrites a message: a regenerated answer is a new sibling of the old one, and switching
branches only moves the active leaf.

The functions take the `Store` they belong to; `Store` exposes them as methods.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from think._messages import UIMessage
from think.storage._db import Conn, fetch_all, fetch_one
from think.storage._errors import (
    MessageIdConflict,
    MessageNotFound,
    NotRegenerable,
    ParentNotFound,
)
from think.storage._records import Admission, Conversation, TurnRequest, chain_leaf

if TYPE_CHECKING:
    from think.storage._store import Store


class TreeNode(BaseModel):
    """Where a message sits in the tree."""

    id: str
    parent_id: str | None
    role: str
    turn_id: str | None


class Siblings(BaseModel):
    """The messages sharing a parent (and a role), oldest first."""

    messages: list[UIMessage]
    active_index: int | None
    """Which of them lies on the active path; None when the active path runs elsewhere."""


class Appended(BaseModel):
    """The outcome of `add_messages`."""

    messages: list[UIMessage]
    """The messages of the request, as stored."""
    inserted: list[str]
    """The ids appended by this call; the others were stored already (a repeat)."""
    active_leaf_id: str | None


_NODE = """
    SELECT id, parent_id, role, turn_id FROM messages
    WHERE conversation_uid = %(c)s AND id = %(id)s
"""

# The active path is walked from the leaf up, by primary key; the siblings are read through
# `messages_parent_idx`. Two forms, because `parent_id = NULL` matches nothing and
# `IS NOT DISTINCT FROM` cannot use the index.
_SIBLINGS = """
    WITH RECURSIVE active AS (
        SELECT id, parent_id FROM messages WHERE conversation_uid = %(c)s
            AND id = (SELECT active_leaf_id FROM conversations WHERE uid = %(c)s)
      UNION ALL
        SELECT m.id, m.parent_id
        FROM messages m JOIN active a ON m.conversation_uid = %(c)s AND m.id = a.parent_id
    )
    SELECT s.id, s.role, s.parts, s.metadata, s.id IN (SELECT id FROM active) AS active
    FROM messages s
    WHERE s.conversation_uid = %(c)s AND {parent} AND s.role = %(role)s
    ORDER BY s.position
"""
_SIBLINGS_OF = _SIBLINGS.format(parent="s.parent_id = %(parent)s")
_SIBLINGS_AT_ROOT = _SIBLINGS.format(parent="s.parent_id IS NULL")

# From a message down to a leaf, taking the newest child (the highest `position`) each time.
_NEWEST_LEAF = """
    WITH RECURSIVE down AS (
        SELECT id, 0 AS depth FROM messages WHERE conversation_uid = %(c)s AND id = %(id)s
      UNION ALL
        SELECT child.id, d.depth + 1
        FROM down d CROSS JOIN LATERAL (
            SELECT m.id FROM messages m
            WHERE m.conversation_uid = %(c)s AND m.parent_id = d.id
            ORDER BY m.position DESC LIMIT 1
        ) child
    )
    SELECT id FROM down ORDER BY depth DESC LIMIT 1
"""

_MOVE_LEAF = """
    UPDATE conversations SET active_leaf_id = %(leaf)s WHERE uid = %(c)s
    RETURNING uid, tenant, agent, id, created_at, active_leaf_id, metadata
"""


async def node(conn: Conn, conversation_uid: str, message_id: str) -> TreeNode | None:
    row = await fetch_one(conn, _NODE, {"c": conversation_uid, "id": message_id})
    return TreeNode.model_validate(row) if row else None


async def add_messages(
    store: Store,
    conversation_uid: str,
    messages: Sequence[UIMessage],
    *,
    parent_id: str | None = None,
) -> Appended:
    """Append `messages` as a chain without running a turn (Think's `addMessages`).

    The first goes under `parent_id`, or under the active leaf when it is None; each next one
    under the one before. Idempotent by message id: a message already stored with the same
    role, parts and metadata is left as it is (the chain continues from it); the same id with
    other content is a `MessageIdConflict` and nothing is written. The active leaf moves to
    the last message this call appended; a call that appended nothing changes nothing.
    """
    ids = [m.id for m in messages]
    for i, message in enumerate(messages):
        if message.id in ids[:i]:
            raise MessageIdConflict(
                message.id, "appears twice in the input", field=f"messages.{i}.id"
            )
    async with store.db.transaction() as conn:
        # Serialises appends to one conversation, so two concurrent calls chain rather than
        # fork under the same leaf, and a repeat waits for the first call's commit.
        conv = await fetch_one(
            conn,
            "SELECT active_leaf_id FROM conversations WHERE uid = %(c)s FOR UPDATE",
            {"c": conversation_uid},
        )
        assert conv is not None, conversation_uid
        if parent_id is not None and await node(conn, conversation_uid, parent_id) is None:
            raise ParentNotFound(parent_id)
        stored = {
            row["id"]: row
            for row in await fetch_all(
                conn,
                "SELECT id, role, parts, metadata FROM messages "
                "WHERE conversation_uid = %(c)s AND id = ANY(%(ids)s)",
                {"c": conversation_uid, "ids": ids},
            )
        }
        last: str | None = parent_id if parent_id is not None else conv["active_leaf_id"]
        inserted: list[str] = []
        for i, message in enumerate(messages):
            known = stored.get(message.id)
            if known is not None:
                if not _same(known, message):
                    raise MessageIdConflict(
                        message.id,
                        "is already a message of this conversation, with other content",
                        field=f"messages.{i}.id",
                    )
            else:
                chain = await store.insert_messages(
                    conn, conversation_uid, [message], parent_id=last, turn_id=None
                )
                if chain_leaf(chain, last) != message.id:
                    # A turn stored a message under this id since we looked (turns do not
                    # take the conversation lock). Roll back rather than store it renamed.
                    raise MessageIdConflict(
                        message.id,
                        "is already a message of this conversation",
                        field=f"messages.{i}.id",
                    )
                inserted.append(message.id)
            last = message.id
        active = conv["active_leaf_id"]
        if inserted:
            active = inserted[-1]
            await store.set_active_leaf(conn, conversation_uid, active)
    return Appended(messages=list(messages), inserted=inserted, active_leaf_id=active)


def _same(row: dict[str, Any], message: UIMessage) -> bool:
    return bool(
        row["role"] == message.role
        and row["parts"] == message.parts
        and row["metadata"] == message.metadata
    )


async def siblings(store: Store, conversation_uid: str, message_id: str) -> Siblings:
    """The messages that share `message_id`'s parent and role (itself included), oldest
    first: the answers of a regenerated turn, or the edits of a user message."""
    async with store.db.connection() as conn:
        found = await node(conn, conversation_uid, message_id)
        if found is None:
            raise MessageNotFound(message_id)
        params = {
            "c": conversation_uid,
            "parent": found.parent_id,
            "role": found.role,
        }
        query = _SIBLINGS_AT_ROOT if found.parent_id is None else _SIBLINGS_OF
        rows = await fetch_all(conn, query, params)
    active = [i for i, row in enumerate(rows) if row["active"]]
    return Siblings(
        messages=[
            UIMessage.model_construct(
                id=r["id"], role=r["role"], parts=r["parts"], metadata=r["metadata"]
            )
            for r in rows
        ],
        active_index=active[0] if active else None,
    )


async def switch_branch(
    store: Store, conversation_uid: str, message_id: str, *, exact: bool = False
) -> Conversation:
    """Make the branch through `message_id` the active path, in one statement's time.

    The active leaf becomes the newest leaf below `message_id`, found by following the newest
    child from it (`message_id` itself when it has none), so switching to a sibling shows its
    whole branch as it was last extended. `exact=True` makes `message_id` itself the leaf (the
    next turn then branches from it).
    """
    async with store.db.transaction() as conn:
        if exact:
            leaf = message_id if await node(conn, conversation_uid, message_id) else None
        else:
            row = await fetch_one(conn, _NEWEST_LEAF, {"c": conversation_uid, "id": message_id})
            leaf = row["id"] if row else None
        if leaf is None:
            raise MessageNotFound(message_id, field="leaf_id")
        moved = await fetch_one(conn, _MOVE_LEAF, {"c": conversation_uid, "leaf": leaf})
    assert moved is not None, conversation_uid
    return Conversation.model_validate(moved)


def regenerate_hash(message_id: str, body: dict[str, Any]) -> str:
    """The request hash of a regenerate: what an idempotent retry must repeat. Never equal to
    a submission's, so a key used for one and then the other is a conflict."""
    canonical = json.dumps(
        {"regenerate": message_id, "body": body}, sort_keys=True, separators=(",", ":")
    )
    return hashlib.sha256(canonical.encode()).hexdigest()


async def regenerate(
    store: Store,
    *,
    tenant: str,
    agent: str,
    conversation_id: str,
    message_id: str,
    idempotency_key: str | None = None,
    body: dict[str, Any] | None = None,
    priority: int | None = None,
) -> Admission:
    """Record a turn that answers `message_id`'s parent again, beside `message_id`.
    `priority`: its agent's (`TurnRequest.priority`).

    The turn appends no message; the model sees the path up to the parent (not the old
    answer), and the new answer becomes the active leaf when the turn ends. The old answer
    stays. Like `admit_turn`, this only records the turn: the caller hands it to Temporal.
    """
    conv = await store.get_conversation(tenant=tenant, agent=agent, conversation_id=conversation_id)
    found = None
    if conv is not None:
        async with store.db.connection() as conn:
            found = await node(conn, conv.uid, message_id)
    if found is None:
        raise MessageNotFound(message_id)
    if found.role != "assistant":
        raise NotRegenerable(message_id, f"it is a {found.role} message, not an assistant one")
    if found.parent_id is None:
        raise NotRegenerable(message_id, "it is the first message: it answers nothing")
    request = TurnRequest(
        messages=[],
        parent_id=found.parent_id,
        regenerates=message_id,
        body=body or {},
        priority=priority,
    )
    return await store.admit_turn(
        tenant=tenant,
        agent=agent,
        conversation_id=conversation_id,
        request=request,
        request_hash=regenerate_hash(message_id, body or {}),
        idempotency_key=idempotency_key,
    )
