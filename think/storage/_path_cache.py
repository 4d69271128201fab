"""A worker's memory of the paths its model steps read, so a step reads only what is new.

Every model step sends the model the path from the root to the turn's parent. Read whole from
Postgres, that costs time in proportion to the conversation (a 1,000-turn conversation read
~2,000 messages per step), so turn 1,000 would be slower than turn 1. Messages are immutable
once stored (the one exception, `add_messages(mode="upsert")`, bumps
`conversations.messages_revision`), so a path read once stays right: the next step's path is
the same path plus the messages stored under its old leaf since, which one short walk up from
the new leaf finds. A branch elsewhere, a changed revision or a miss reads the whole path, as
before.

Bounded by bytes (the messages' stored sizes), least recently used first out. Each worker has
its own; nothing depends on it being warm.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, cast

from psycopg.rows import DictRow

from think._messages import UIMessage
from think.storage._db import Conn
from think.storage._records import StoredMessage

WALK_LIMIT = 64
"""How far up from the new leaf a walk looks for the cached path before reading it whole."""


def walk(stop: str = "") -> str:
    """Up the tree from `%(leaf)s` to the root (or until `stop` holds of the row last
    reached), then the messages found, root first."""
    return f"""
    WITH RECURSIVE path AS (
        SELECT id, parent_id, 0 AS depth
        FROM messages WHERE conversation_uid = %(c)s AND id = %(leaf)s
      UNION ALL
        SELECT m.id, m.parent_id, p.depth + 1
        FROM messages m JOIN path p ON m.conversation_uid = %(c)s AND m.id = p.parent_id
        {f"WHERE NOT ({stop})" if stop else ""}
    )
    SELECT m.id, m.parent_id, m.role, m.parts, m.metadata, m.byte_size
    FROM path p JOIN messages m ON m.conversation_uid = %(c)s AND m.id = p.id
    ORDER BY p.depth DESC
"""


_WHOLE = walk()
# Up from the new leaf, stopping at (and including) the cached leaf, or after WALK_LIMIT.
_NEWER = walk("p.id = %(known)s OR p.depth >= %(limit)s")


@dataclass
class _Message:
    id: str
    parent_id: str | None
    role: str
    message: UIMessage
    """Built once and handed to every step: the same object each time, so what is derived
    from it (`to_chat_messages`' conversions) can be kept by identity. Never changed."""
    size: int


@dataclass
class _Path:
    revision: int
    messages: list[_Message]
    index: dict[str, int]
    size: int


def _message(
    id: str, parent_id: str | None, role: str, parts: Any, metadata: Any, size: int
) -> _Message:
    """A path's message, however it became known (read, or just stored), built alike."""
    return _Message(
        id=id,
        parent_id=parent_id,
        role=role,
        message=UIMessage.model_construct(
            id=id,
            role=cast(Literal["user", "assistant", "system"], role),
            parts=parts,
            metadata=metadata,
        ),
        size=size,
    )


def _messages(rows: list[DictRow]) -> list[_Message]:
    return [
        _message(
            r["id"], r["parent_id"], r["role"], r["parts"], r["metadata"], int(r["byte_size"] or 0)
        )
        for r in rows
    ]


class PathCache:
    def __init__(self, max_bytes: int = 64 * 1024 * 1024) -> None:
        """`max_bytes` counts the messages' stored (JSON) sizes; decoded, they take several
        times that in memory."""
        self._paths: OrderedDict[str, _Path] = OrderedDict()
        self._max_bytes = max_bytes
        self._bytes = 0
        self.hits = 0
        self.misses = 0
        self.reads = 0
        """Statements sent (a walk up from a new leaf, or a whole path): 0 per step while every
        message a step's path gained since was stored by this worker."""

    async def path(
        self,
        conn: Conn,
        conversation_uid: str,
        leaf_id: str | None,
        *,
        revision: int,
        byte_budget: int | None,
    ) -> list[UIMessage]:
        """What `Store.path` answers for the same arguments."""
        if leaf_id is None:
            return []
        messages = await self._messages(conn, conversation_uid, leaf_id, revision)
        return _within(messages, byte_budget)

    async def _messages(
        self, conn: Conn, conversation_uid: str, leaf_id: str, revision: int
    ) -> list[_Message]:
        cached = self._paths.get(conversation_uid)
        if cached is not None and cached.revision == revision:
            at = cached.index.get(leaf_id)
            if at is not None:  # the leaf is on the cached path (a regenerate, say)
                self.hits += 1
                self._paths.move_to_end(conversation_uid)
                return cached.messages[: at + 1]
            known = cached.messages[-1].id
            walk = {"c": conversation_uid, "leaf": leaf_id, "known": known, "limit": WALK_LIMIT}
            self.reads += 1
            cursor = await conn.execute(_NEWER, walk)
            newer = _messages(await cursor.fetchall())
            if newer and newer[0].id == known:
                self.hits += 1
                messages = cached.messages + newer[1:]
                self._keep(conversation_uid, revision, messages)
                return messages
            if newer and newer[0].parent_id is None:
                self.hits += 1
                self._keep(conversation_uid, revision, newer)  # the whole (short) path
                return newer
        self.misses += 1
        self.reads += 1
        cursor = await conn.execute(_WHOLE, {"c": conversation_uid, "leaf": leaf_id})
        messages = _messages(await cursor.fetchall())
        self._keep(conversation_uid, revision, messages)
        return messages

    def extend(self, conversation_uid: str, revision: int, stored: Sequence[StoredMessage]) -> None:
        """Messages just stored under the end of the cached path (or at the root): the step
        about to read the path (the first, after its turn's messages went in) then finds its
        leaf here and reads nothing. Anything else is left to the read.

        Called inside the transaction that stored them, or with what a first step read of its
        turn's start (`Store.read_started_turn`). Should it roll back, the path ends in
        messages that are not stored; a hit returns only a prefix up to a leaf a step names,
        and a step names only a stored leaf, so they are never read: the next walk up does
        not find them and replaces the path."""
        if not stored:
            return
        head = stored[0].parent_id
        base: list[_Message] = []
        if head is not None:
            cached = self._paths.get(conversation_uid)
            if (
                cached is None
                or cached.revision != revision
                or not cached.messages
                or cached.messages[-1].id != head
            ):
                return
            base = cached.messages
        added = [
            _message(
                s.message.id,
                s.parent_id,
                s.message.role,
                s.message.parts,
                s.message.metadata,
                s.size,
            )
            for s in stored
        ]
        self._keep(conversation_uid, revision, base + added)

    def _keep(self, conversation_uid: str, revision: int, messages: list[_Message]) -> None:
        old = self._paths.pop(conversation_uid, None)
        if old is not None:
            self._bytes -= old.size
        size = sum(m.size for m in messages)
        if size > self._max_bytes:
            return
        entry = _Path(revision, messages, {m.id: i for i, m in enumerate(messages)}, size)
        self._paths[conversation_uid] = entry
        self._bytes += size
        while self._bytes > self._max_bytes and self._paths:
            _, evicted = self._paths.popitem(last=False)
            self._bytes -= evicted.size


def _within(messages: list[_Message], byte_budget: int | None) -> list[UIMessage]:
    """The path as `Store.path` gives it: with a budget, the newest messages whose sizes add
    up to it (the leaf always, a system message at the root too), starting at a user
    message when older ones were left out."""
    kept = messages
    if byte_budget is not None and messages:
        total = 0
        start = len(messages)
        for i in range(len(messages) - 1, -1, -1):
            total += messages[i].size
            if i < len(messages) - 1 and total > byte_budget:
                break
            start = i
        first = messages[0]
        root = first if first.parent_id is None and first.role == "system" else None
        if start > (1 if root is not None else 0):  # something was left out
            rest = messages[start:]
            first_user = next((i for i, m in enumerate(rest) if m.role == "user"), len(rest) - 1)
            kept = [*([root] if root is not None else []), *rest[first_user:]]
    return [m.message for m in kept if m.message.parts]
