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

import bisect
import contextlib
from collections import OrderedDict
from collections.abc import Iterator, Sequence
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


class _Path:
    """A cached path, root first, grown in place as the conversation goes on: what a step
    asks of it (the path to a leaf on it, within a byte budget) is found by index and
    bisection, so a step's cost does not grow with the conversation."""

    def __init__(self, revision: int, messages: list[_Message]) -> None:
        self.revision = revision
        self.messages: list[_Message] = []
        self.shown: list[UIMessage] = []
        """Each message's `UIMessage`, beside `messages`: a window of it is a slice."""
        self.index: dict[str, int] = {}
        self.before: list[int] = [0]
        """`before[i]`: the stored bytes of the messages ahead of message `i`."""
        self.empty: list[int] = []
        """Where the messages with no parts are (never shown), in order."""
        self.grow(messages)

    @property
    def size(self) -> int:
        return self.before[-1]

    def grow(self, messages: Sequence[_Message]) -> None:
        for m in messages:
            if not m.message.parts:
                self.empty.append(len(self.messages))
            self.index[m.id] = len(self.messages)
            self.messages.append(m)
            self.shown.append(m.message)
            self.before.append(self.before[-1] + m.size)

    def window(self, end: int, byte_budget: int | None) -> list[UIMessage]:
        """The path as `Store.path` gives it, up to (not including) message `end`: with a
        budget, the newest messages whose sizes add up to it (the last always, a system
        message at the root too), starting at a user message when older ones were left
        out."""
        if end == 0:
            return []
        start = 0
        if byte_budget is not None:
            # The first message from which the rest fits, or the last alone if nothing does.
            start = min(
                bisect.bisect_left(self.before, self.before[end] - byte_budget, 0, end), end - 1
            )
        first = self.messages[0]
        root = first.parent_id is None and first.role == "system"
        if start <= (1 if root else 0):  # nothing left out
            return self._shown(0, end)
        first_user = next(
            (i for i in range(start, end) if self.messages[i].role == "user"), end - 1
        )
        return [*(self._shown(0, 1) if root else []), *self._shown(first_user, end)]

    def _shown(self, start: int, end: int) -> list[UIMessage]:
        gaps = self.empty[
            bisect.bisect_left(self.empty, start) : bisect.bisect_left(self.empty, end)
        ]
        if not gaps:
            return self.shown[start:end]
        return [m for m in self.shown[start:end] if m.parts]


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
    def __init__(
        self, max_bytes: int = 64 * 1024 * 1024, max_path_bytes: int | None = None
    ) -> None:
        """`max_bytes` counts the messages' stored (JSON) sizes; decoded, they take several
        times that in memory. A path over `max_path_bytes` (by default an eighth of
        `max_bytes`, 8 MiB) is not kept: it is a conversation with a huge message (a large
        `write`'s input), four of which would fill the cache, and it kept a worker's memory
        up long after its turn; its steps read it from Postgres, as a cold worker's do."""
        self._paths: OrderedDict[str, _Path] = OrderedDict()
        self._max_bytes = max_bytes
        self._max_path_bytes = max_bytes // 8 if max_path_bytes is None else max_path_bytes
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
        path, end = await self._path_to(conn, conversation_uid, leaf_id, revision)
        return path.window(end, byte_budget)

    async def _path_to(
        self, conn: Conn, conversation_uid: str, leaf_id: str, revision: int
    ) -> tuple[_Path, int]:
        """A path holding the one to `leaf_id`, and where that ends on it."""
        cached = self._paths.get(conversation_uid)
        if cached is not None and cached.revision == revision:
            at = cached.index.get(leaf_id)
            if at is not None:  # the leaf is on the cached path (a regenerate, say)
                self.hits += 1
                self._paths.move_to_end(conversation_uid)
                return cached, at + 1
            count = len(cached.messages)
            known = cached.messages[-1].id
            walk = {"c": conversation_uid, "leaf": leaf_id, "known": known, "limit": WALK_LIMIT}
            self.reads += 1
            cursor = await conn.execute(_NEWER, walk)
            newer = _messages(await cursor.fetchall())
            if newer and newer[0].id == known:
                self.hits += 1
                if len(cached.messages) == count and self._paths.get(conversation_uid) is cached:
                    self._grow(conversation_uid, cached, newer[1:])
                    return cached, len(cached.messages)
                # Grown or replaced by another step meanwhile: this path is a new one.
                path = _Path(revision, [*cached.messages[:count], *newer[1:]])
                self._keep(conversation_uid, path)
                return path, len(path.messages)
            if newer and newer[0].parent_id is None:
                self.hits += 1
                path = _Path(revision, newer)  # the whole (short) path
                self._keep(conversation_uid, path)
                return path, len(path.messages)
        self.misses += 1
        self.reads += 1
        cursor = await conn.execute(_WHOLE, {"c": conversation_uid, "leaf": leaf_id})
        path = _Path(revision, _messages(await cursor.fetchall()))
        self._keep(conversation_uid, path)
        return path, len(path.messages)

    def extend(self, conversation_uid: str, revision: int, stored: Sequence[StoredMessage]) -> None:
        """Messages just stored under the end of the cached path (or at the root): the step
        about to read the path (the first, after its turn's messages went in) then finds its
        leaf here and reads nothing. Anything else is left to the read.

        Called inside the transaction that stored them, or with what a first step read of its
        turn's start (`Store.read_started_turn`). Should it roll back, the path ends in
        messages that are not stored; a hit returns only a prefix up to a leaf a step names,
        and a step names only a stored leaf, so they are never read: the next walk up does
        not find them and replaces the path. Messages a retry may store again under the same
        ids with other content (a step's answer) are extended under `forgotten_on_error`."""
        if not stored:
            return
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
        head = stored[0].parent_id
        if head is None:
            self._keep(conversation_uid, _Path(revision, added))
            return
        cached = self._paths.get(conversation_uid)
        if (
            cached is not None
            and cached.revision == revision
            and cached.messages
            and cached.messages[-1].id == head
        ):
            self._grow(conversation_uid, cached, added)

    @contextlib.contextmanager
    def forgotten_on_error(self, conversation_uid: str) -> Iterator[None]:
        """Forget the conversation's path should the block raise: for a transaction that
        `extend`s with messages whose ids a retry may store again with other content (a step's
        answer), which the path would otherwise keep."""
        try:
            yield
        except BaseException:
            self.forget(conversation_uid)
            raise

    def forget(self, conversation_uid: str) -> None:
        """Drop the conversation's path: its next step reads it whole."""
        old = self._paths.pop(conversation_uid, None)
        if old is not None:
            self._bytes -= old.size

    def _grow(self, conversation_uid: str, path: _Path, added: Sequence[_Message]) -> None:
        """`path`, the cached one, gains `added` at its end (in place: what steps were given
        of it are copies)."""
        before = path.size
        path.grow(added)
        self._bytes += path.size - before
        self._paths.move_to_end(conversation_uid)
        self._bound(conversation_uid)

    def _keep(self, conversation_uid: str, path: _Path) -> None:
        self.forget(conversation_uid)
        self._paths[conversation_uid] = path
        self._bytes += path.size
        self._bound(conversation_uid)

    def _bound(self, newest: str) -> None:
        """Least recently used out first; a path over `max_path_bytes` is not kept."""
        path = self._paths[newest]
        if path.size > min(self._max_bytes, self._max_path_bytes):
            del self._paths[newest]
            self._bytes -= path.size
        while self._bytes > self._max_bytes and self._paths:
            _, evicted = self._paths.popitem(last=False)
            self._bytes -= evicted.size
