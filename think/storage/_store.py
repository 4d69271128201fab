"""Reads and writes of conversations, messages and turns, in plain SQL over psycopg.

Every write that a Temporal activity makes is idempotent (keyed inserts, `ON CONFLICT`, state
checks under a row lock), so an activity retried after a crash changes nothing twice. Writes
that complete a step of a turn take the turn row `FOR UPDATE`, which serialises the activities
of one turn without any lock held across a model call.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from typing import Any

from psycopg.rows import DictRow
from psycopg.types.json import Jsonb

from think._messages import UIMessage, new_id, search_text
from think.exceptions import UserError
from think.storage import _admission, _queue, _tree, stream_log
from think.storage._db import Conn, Database, collector_paused, fetch_all, fetch_one
from think.storage._errors import MessageIdConflict, ParentNotFound, TurnNotRecorded
from think.storage._path_cache import walk
from think.storage._records import (
    AWAITS_WORKFLOW_SQL,
    Conversation,
    ListedConversation,
    QueueLock,
    StoredMessage,
    TurnRecord,
    TurnRequest,
)
from think.storage._turn_columns import assignments
from think.storage._turn_ids import turn_id_candidates
from think.storage._turn_queries import (
    CLAIM_QUEUED_TURN,
    CLAIM_START,
    CLAIM_STEP,
    LOCK_QUEUED_TURN,
    LOCK_TURN,
    LOCK_TURN_QUEUE,
    READ_STARTED_TURN,
    TURN_BY_ID,
    TURN_NAMED,
    TURN_SELECT,
    turn_record,
)
from think.storage.stream_log import FirstClaim

_CONVERSATION_COLUMNS = "uid, tenant, agent, id, created_at, active_leaf_id, metadata"

_INSERT_CONVERSATION = f"""
    INSERT INTO conversations (uid, tenant, agent, id, metadata)
    VALUES (%(uid)s, %(tenant)s, %(agent)s, %(id)s, %(metadata)s)
    ON CONFLICT ON CONSTRAINT conversations_name_key DO NOTHING
    RETURNING {_CONVERSATION_COLUMNS}
"""
_FIND_CONVERSATION = f"""
    SELECT {_CONVERSATION_COLUMNS} FROM conversations
    WHERE tenant = %(tenant)s AND agent = %(agent)s AND id = %(id)s
"""
_CONVERSATION_BY_UID = f"SELECT {_CONVERSATION_COLUMNS} FROM conversations WHERE uid = %(uid)s"
# Newest first; the unique (tenant, agent, id) index finds the rows, a sort orders them.
# With a title: the metadata's `title`, else the start of its first user message.
_LIST_CONVERSATIONS = """
    SELECT c.uid, c.tenant, c.agent, c.id, c.created_at, c.active_leaf_id, c.metadata,
        COALESCE(NULLIF(c.metadata ->> 'title', ''), left(first.text_content, %(title)s))
            AS title
    FROM conversations c
    LEFT JOIN LATERAL (
        SELECT m.text_content FROM messages m
        WHERE m.conversation_uid = c.uid AND m.role = 'user' AND m.text_content <> ''
        ORDER BY m.position LIMIT 1
    ) first ON true
    WHERE c.tenant = %(tenant)s AND c.agent = %(agent)s
    ORDER BY c.created_at DESC, c.id DESC
    LIMIT %(limit)s
"""
TITLE_CHARS = 80
"""A listed conversation's title is at most this long (its first user message's start)."""

_PATH = walk()

# The path within a byte budget, newest first: the walk carries each row's stored size
# (`byte_size`) as a running total, and only the rows within the budget are fetched. The leaf
# always is, and so is a system message at the root of the path (instructions the model must
# keep reading).
_PATH_WITHIN = """
    WITH RECURSIVE path AS (
        SELECT id, parent_id, byte_size::bigint AS total, 0 AS depth
        FROM messages WHERE conversation_uid = %(c)s AND id = %(leaf)s
      UNION ALL
        SELECT m.id, m.parent_id, p.total + m.byte_size, p.depth + 1
        FROM messages m JOIN path p ON m.conversation_uid = %(c)s AND m.id = p.parent_id
    )
    SELECT m.id, m.role, m.parts, m.metadata, p.parent_id
    FROM path p JOIN messages m ON m.conversation_uid = %(c)s AND m.id = p.id
    WHERE p.depth = 0 OR p.total <= %(budget)s OR (p.parent_id IS NULL AND m.role = 'system')
    ORDER BY p.depth DESC
"""

_INSERT_MESSAGE = """
    INSERT INTO messages (conversation_uid, id, parent_id, role, parts, metadata, turn_id,
                          text_content, byte_size)
    VALUES (%(c)s, %(id)s, %(parent_id)s, %(role)s, %(parts)s, %(metadata)s, %(turn_id)s,
            %(text)s, %(size)s)
    ON CONFLICT DO NOTHING
    RETURNING id
"""


_INSERT_ACTIVE_MESSAGE = f"""
    WITH inserted AS ({_INSERT_MESSAGE}),
    moved AS (
        UPDATE conversations SET active_leaf_id = %(id)s
        WHERE uid = %(c)s AND EXISTS (SELECT 1 FROM inserted)
    )
    SELECT id FROM inserted
"""
"""`_INSERT_MESSAGE`, and the message becomes the active leaf if it was inserted."""


def _conversation(row: DictRow) -> Conversation:
    # The queries select exactly the record's fields, by the same names.
    return Conversation.model_validate(row)


def _window(rows: list[DictRow]) -> list[DictRow]:
    """The rows of a budgeted path (root first). When the budget left older messages out, the
    window starts at a user message: a model reading an answer to a question it cannot see
    gains nothing, and some providers refuse a conversation that starts with one."""
    root = rows[0] if rows and rows[0]["parent_id"] is None else None
    rest = rows[1:] if root is not None else rows
    if not rest or (root is not None and rest[0]["parent_id"] == root["id"]):
        return rows  # nothing left out
    start = next((i for i, r in enumerate(rest) if r["role"] == "user"), len(rest) - 1)
    return [*([root] if root is not None else []), *rest[start:]]


def _message_params(
    conversation_uid: str, message: UIMessage, *, parent_id: str | None, turn_id: str | None
) -> dict[str, Any]:
    parts = message.parts
    return {
        "c": conversation_uid,
        "id": message.id,
        "parent_id": parent_id,
        "role": message.role,
        "parts": Jsonb(parts),
        "metadata": Jsonb(message.metadata) if message.metadata is not None else None,
        "turn_id": turn_id,
        "text": search_text(parts),
        "size": len(json.dumps(parts)),
    }


class Store:
    """The conversation store over the process's one connection pool."""

    def __init__(self, db: Database) -> None:
        self.db = db

    # -- conversations ---------------------------------------------------------------------

    async def ensure_conversation(
        self,
        conn: Conn,
        *,
        tenant: str,
        agent: str,
        conversation_id: str,
        metadata: dict[str, Any] | None = None,
        lock: bool = False,
    ) -> tuple[Conversation, bool]:
        """Get the conversation, creating it first if needed; says whether it was created.
        `lock`: under the conversation's row lock (the queue's, `lock_queue`), taken by the
        same statement that finds it, or held since this transaction inserted it."""
        key = {"tenant": tenant, "agent": agent, "id": conversation_id}
        find = _FIND_CONVERSATION + " FOR UPDATE" if lock else _FIND_CONVERSATION
        row = await fetch_one(conn, find, key)
        if row is not None:
            return _conversation(row), False
        row = await fetch_one(
            conn,
            _INSERT_CONVERSATION,
            {**key, "uid": str(uuid.uuid4()), "metadata": Jsonb(metadata or {})},
        )
        if row is not None:
            return _conversation(row), True
        # Created by a concurrent request since our first look.
        row = await fetch_one(conn, find, key)
        assert row is not None
        return _conversation(row), False

    async def create_conversation(
        self, *, tenant: str, agent: str, conversation_id: str, metadata: dict[str, Any]
    ) -> tuple[Conversation, bool]:
        async with self.db.transaction() as conn:
            return await self.ensure_conversation(
                conn,
                tenant=tenant,
                agent=agent,
                conversation_id=conversation_id,
                metadata=metadata,
            )

    async def get_conversation(
        self, *, tenant: str, agent: str, conversation_id: str
    ) -> Conversation | None:
        async with self.db.connection() as conn:
            row = await fetch_one(
                conn, _FIND_CONVERSATION, {"tenant": tenant, "agent": agent, "id": conversation_id}
            )
        return _conversation(row) if row else None

    async def list_conversations(
        self, *, tenant: str, agent: str, limit: int = 50
    ) -> list[ListedConversation]:
        """The tenant's conversations with one agent, newest first, with their titles (the
        chat page's list)."""
        query = {"tenant": tenant, "agent": agent, "limit": limit, "title": TITLE_CHARS}
        async with self.db.connection() as conn:
            rows = await fetch_all(conn, _LIST_CONVERSATIONS, query)
        return [ListedConversation.model_validate(row) for row in rows]

    async def conversation_by_uid(self, conn: Conn, uid: str) -> Conversation:
        row = await fetch_one(conn, _CONVERSATION_BY_UID, {"uid": uid})
        assert row is not None
        return _conversation(row)

    async def set_active_leaf(self, conn: Conn, conversation_uid: str, leaf_id: str) -> None:
        await conn.execute(
            "UPDATE conversations SET active_leaf_id = %(leaf)s WHERE uid = %(c)s",
            {"leaf": leaf_id, "c": conversation_uid},
        )

    # -- messages --------------------------------------------------------------------------

    async def path(
        self,
        conversation_uid: str,
        leaf_id: str | None,
        conn: Conn | None = None,
        *,
        byte_budget: int | None = None,
    ) -> list[UIMessage]:
        """The messages from the root to `leaf_id`, root first.

        With `byte_budget` (a model step's `hydration_byte_budget`), only the newest messages
        whose stored sizes (`messages.byte_size`) add up to at most the budget: older ones are
        left out, and so are any assistant messages the window would then start with. The
        leaf is always kept, and so is a system message at the root."""
        if leaf_id is None:
            return []
        if conn is None:
            async with self.db.connection() as own:
                return await self.path(conversation_uid, leaf_id, own, byte_budget=byte_budget)
        params = {"c": conversation_uid, "leaf": leaf_id, "budget": byte_budget}
        cursor = await conn.execute(_PATH if byte_budget is None else _PATH_WITHIN, params)
        with collector_paused():
            rows = await cursor.fetchall()  # decodes every row's parts
            if byte_budget is not None:
                rows = _window(rows)
            return [
                UIMessage.model_construct(
                    id=r["id"], role=r["role"], parts=r["parts"], metadata=r["metadata"]
                )
                for r in rows
                if r["parts"]
            ]

    async def message_exists(self, conversation_uid: str, message_id: str) -> bool:
        async with self.db.connection() as conn:
            row = await fetch_one(
                conn,
                "SELECT 1 AS found FROM messages WHERE conversation_uid = %(c)s AND id = %(id)s",
                {"c": conversation_uid, "id": message_id},
            )
        return row is not None

    async def insert_messages(
        self,
        conn: Conn,
        conversation_uid: str,
        messages: Sequence[UIMessage],
        *,
        parent_id: str | None,
        turn_id: str | None,
        activate: bool = False,
    ) -> list[StoredMessage]:
        """Append `messages` as a chain under `parent_id`; returns them as stored (the chain's
        leaf: `chain_leaf`).
        `activate`: the last one becomes the conversation's active leaf (in the statement that
        inserts it; the caller holds the conversation's lock).

        A message this turn already inserted is left as it is, so a retried activity is
        harmless. An id another turn took meanwhile (two queued turns admitted with the same
        new id) is replaced by a fresh one: the content is kept, never dropped.
        """
        chain: list[StoredMessage] = []
        last = parent_id
        for i, message in enumerate(messages):
            params = _message_params(conversation_uid, message, parent_id=last, turn_id=turn_id)
            activating = activate and i == len(messages) - 1
            query = _INSERT_ACTIVE_MESSAGE if activating else _INSERT_MESSAGE
            if await fetch_one(conn, query, params) is None:
                owner = await fetch_one(
                    conn,
                    "SELECT turn_id FROM messages WHERE conversation_uid = %(c)s AND id = %(id)s",
                    params,
                )
                if turn_id is None or owner is None or owner["turn_id"] != turn_id:
                    message = message.model_copy(update={"id": new_id("msg")})
                    await conn.execute(_INSERT_MESSAGE, {**params, "id": message.id})
                if activating:  # the insert that would have moved the leaf did nothing
                    await self.set_active_leaf(conn, conversation_uid, message.id)
            chain.append(StoredMessage(message, parent_id=last, size=params["size"]))
            last = message.id
        return chain

    # -- turns -----------------------------------------------------------------------------

    admit_turn = _admission.admit_turn
    """Record a submission durably, or find the one its idempotency key (or submission id)
    already made. The unique constraints on (conversation, key) and on the id are what make a
    storm of identical requests produce one turn: every loser's insert waits for the winner's
    commit, does nothing, and then reads the winner's row."""

    async def _check_request(
        self, conn: Conn, conversation_uid: str, request: TurnRequest, *, new_conversation: bool
    ) -> None:
        """Refuse what the turn could not apply later: a missing parent, reused message ids.
        Only ids the caller chose are looked up (`UIMessage.chose_id`); a conversation this
        transaction created has no messages to look in."""
        if request.parent_id is not None and new_conversation:
            raise ParentNotFound(request.parent_id)
        if request.parent_id is not None:
            found = await fetch_one(
                conn,
                "SELECT 1 AS found FROM messages WHERE conversation_uid = %(c)s AND id = %(id)s",
                {"c": conversation_uid, "id": request.parent_id},
            )
            if found is None:
                raise ParentNotFound(request.parent_id)
        ids = [m.id for m in request.messages]
        repeated = sorted({i for i in ids if ids.count(i) > 1})
        if repeated:
            raise MessageIdConflict(repeated[0], "appears twice in the input")
        chosen = [m.id for m in request.messages if m.chose_id]
        if new_conversation or not chosen:
            return
        taken = await fetch_one(
            conn,
            "SELECT id FROM messages WHERE conversation_uid = %(c)s AND id = ANY(%(ids)s) LIMIT 1",
            {"c": conversation_uid, "ids": chosen},
        )
        if taken is not None:
            raise MessageIdConflict(taken["id"], "is already a message of this conversation")

    async def count_active_turns(self) -> dict[str, int]:
        """Turns not ended, by status, across tenants (for metrics): one scan of the partial
        index of active turns, however many turns have ended."""
        async with self.db.connection() as conn:
            rows = await fetch_all(
                conn,
                "SELECT status, count(*) AS n FROM turns WHERE completed_at IS NULL "
                "GROUP BY status",
            )
        return {str(r["status"]): int(r["n"]) for r in rows}

    async def get_turn(self, turn_id: str) -> TurnRecord | None:
        """The turn of this stored id (`TurnRecord.id`), whoever's it is: for the service's
        own code, which has the id from a record. A client's id goes through `find_turn`."""
        async with self.db.connection() as conn:
            row = await fetch_one(conn, TURN_BY_ID, {"id": turn_id})
        return turn_record(row) if row else None

    async def find_turn(self, conversation: Conversation, turn_id: str) -> TurnRecord | None:
        """The turn of `conversation` that a client names `turn_id` (the id a door showed it,
        its `submission_id`; `think.storage._turn_ids`), in one read; None when the
        conversation has no such turn, whoever else has one of that name."""
        ids = turn_id_candidates(conversation.tenant, turn_id)
        async with self.db.connection() as conn:
            row = await fetch_one(conn, TURN_NAMED, {"ids": ids, "c": conversation.uid})
        return turn_record(row) if row else None

    async def list_turns(
        self, conversation_uid: str, *, status: Sequence[str] = (), limit: int = 100
    ) -> list[TurnRecord]:
        query = TURN_SELECT + " WHERE t.conversation_uid = %(c)s"
        if status:
            query += " AND t.status = ANY(%(status)s)"
        query += " ORDER BY t.created_at DESC, t.id DESC LIMIT %(limit)s"
        async with self.db.connection() as conn:
            rows = await fetch_all(
                conn, query, {"c": conversation_uid, "status": list(status), "limit": limit}
            )
        return [turn_record(r) for r in rows]

    async def claim_step(self, conn: Conn, turn_id: str, key: str) -> tuple[TurnRecord, int]:
        """Take the fence `key` for a new attempt (as `claim` does) and read the turn, in one
        statement on an autocommit connection: what a model step after the first needs before
        it calls the model. Returns the turn as it then stands and the attempt's number."""
        row = await fetch_one(conn, CLAIM_STEP, {"id": turn_id, "key": key})
        if row is None:
            raise UserError(f"turn {turn_id!r} does not exist")
        attempt = int(row.pop("claimed_attempt"))
        return turn_record(row), attempt

    async def read_started_turn(
        self, conn: Conn, turn_id: str
    ) -> tuple[TurnRecord, list[StoredMessage]] | None:
        """A first step's turn if its admission started it (`_queue.starts_at_admission`),
        with the messages the start stored (for `PathCache.extend`), in one read; None when
        the turn is still `pending` (its step starts it, `claim_queued_turn`) or not
        recorded."""
        row = await fetch_one(conn, READ_STARTED_TURN, {"id": turn_id})
        if row is None:
            return None
        stored = [
            StoredMessage(
                UIMessage.model_construct(
                    id=m["id"], role=m["role"], parts=m["parts"], metadata=m["metadata"]
                ),
                parent_id=m["parent_id"],
                size=int(m["byte_size"] or 0),
            )
            for m in row.pop("stored") or []
        ]
        return turn_record(row), stored

    async def read_turn(self, conn: Conn, turn_id: str) -> TurnRecord:
        """The turn as committed, on the caller's connection."""
        row = await fetch_one(conn, TURN_BY_ID, {"id": turn_id})
        if row is None:
            raise UserError(f"turn {turn_id!r} does not exist")
        return turn_record(row)

    async def claim_start(self, turn_id: str) -> TurnRecord | None:
        """Mark the worker that starts an announced turn's workflow (`STARTER`) and read the
        turn, in one statement; None when another worker has, or the turn has begun or
        ended. One worker of those told sends the start, not all of them."""
        async with self.db.connection() as conn:
            row = await fetch_one(conn, CLAIM_START, {"id": turn_id})
        return turn_record(row) if row else None

    async def awaiting_workflow(self, turn_ids: list[str]) -> set[str]:
        """Which of these turns still await their workflow (`TurnRecord.awaits_workflow`)."""
        async with self.db.connection() as conn:
            rows = await fetch_all(
                conn,
                "SELECT t.id FROM turns t WHERE t.id = ANY(%(ids)s) AND "
                + AWAITS_WORKFLOW_SQL.format(t="t"),
                {"ids": turn_ids},
            )
        return {str(r["id"]) for r in rows}

    async def claim_first(self, turn_id: str, key: str) -> FirstClaim:
        """`think.streaming.claim_first` on a connection of its own: it runs beside the step
        that claims (`Fence.first`)."""
        async with self.db.connection() as conn:
            return await stream_log.claim_first(conn, turn_id, key)

    async def lock_turn(self, conn: Conn, turn_id: str) -> TurnRecord:
        """The turn, under its row lock."""
        row = await fetch_one(conn, LOCK_TURN, {"id": turn_id})
        if row is None:
            raise UserError(f"turn {turn_id!r} does not exist")
        return turn_record(row)

    async def lock_queue_turn(self, conn: Conn, turn_id: str) -> tuple[TurnRecord, QueueLock]:
        """The turn under its row lock, after its conversation's: what a transaction that may
        start or end the turn takes (`start_turn`, `end_turn`). Admission and cancels take the
        conversation's lock before a turn's, and two transactions that took the same two locks
        in opposite orders would deadlock."""
        leaf = await fetch_one(conn, LOCK_TURN_QUEUE, {"id": turn_id})
        row = await fetch_one(conn, LOCK_QUEUED_TURN, {"id": turn_id})
        if leaf is None or row is None:
            raise UserError(f"turn {turn_id!r} does not exist")
        queue = QueueLock(active_leaf_id=leaf["active_leaf_id"], followers=row["followers"])
        return turn_record(row), queue

    async def claim_queued_turn(
        self, conn: Conn, turn_id: str, key: str
    ) -> tuple[TurnRecord, QueueLock, int]:
        """`lock_queue_turn` and `claim_step` in one statement: the first model step's, which
        starts the turn and claims its fence in one transaction. Returns the attempt's number
        as well (a step that turns out to be recorded already, or a turn that has ended, has
        counted an attempt that writes nothing, which no writer notices)."""
        leaf = await fetch_one(conn, LOCK_TURN_QUEUE, {"id": turn_id})
        if leaf is None:
            raise TurnNotRecorded(turn_id)
        row = await fetch_one(conn, CLAIM_QUEUED_TURN, {"id": turn_id, "key": key})
        if row is None:
            raise TurnNotRecorded(turn_id)
        attempt = int(row.pop("claimed_attempt"))
        queue = QueueLock(active_leaf_id=leaf["active_leaf_id"], followers=row["followers"])
        return turn_record(row), queue, attempt

    async def update_turn(self, conn: Conn, turn_id: str, **values: Any) -> None:
        fragments, params = assignments(values)
        await conn.execute(
            f"UPDATE turns SET {', '.join(fragments)} WHERE id = %(id)s",  # columns checked
            {**params, "id": turn_id},
        )

    async def waiting_heads(
        self, older_than_seconds: float, task_queue: str | None = None, limit: int = 200
    ) -> list[TurnRecord]:
        """Running turns (each conversation's first active turn) that still await their
        workflow a while after they were accepted (`TurnRecord.awaits_workflow`): it may never
        have been started (a sender died between its commit and Temporal), oldest first.
        With `task_queue`, only those admitted for it (or for no queue in particular)."""
        async with self.db.connection() as conn:
            rows = await fetch_all(
                conn,
                "WITH heads AS (SELECT DISTINCT ON (conversation_uid) id, status, fences, "
                "created_at FROM turns WHERE completed_at IS NULL ORDER BY conversation_uid, seq) "
                + TURN_SELECT
                + f" JOIN heads h ON h.id = t.id WHERE {AWAITS_WORKFLOW_SQL.format(t='h')} "
                "AND (%(q)s::text IS NULL OR t.task_queue IS NULL OR t.task_queue = %(q)s) "
                "AND h.created_at < "
                "now() - make_interval(secs => %(s)s) ORDER BY h.created_at LIMIT %(limit)s",
                {"s": older_than_seconds, "q": task_queue, "limit": limit},
            )
        return [turn_record(r) for r in rows]

    async def abort_if_unbegun(self, conn: Conn, turn: TurnRecord, reason: str) -> bool:
        """Abort a turn none of whose steps has begun (`TurnRecord.awaits_workflow`); False when
        one has (or the turn has ended). Takes the conversation's queue lock first, as admission
        does. A step that begins meanwhile claims its fence under the turn's row lock: it sees
        the turn aborted, or this sees the fence."""
        await _queue.lock_queue(conn, turn.conversation_uid)
        row = await fetch_one(
            conn,
            "UPDATE turns t SET status = 'aborted', completed_at = now(), error = %(reason)s "
            f"WHERE t.id = %(id)s AND {AWAITS_WORKFLOW_SQL.format(t='t')} RETURNING t.id",
            {"id": turn.id, "reason": reason},
        )
        return row is not None

    async def note_cancel(self, conn: Conn, turn_id: str, reason: str) -> None:
        """Record why a running turn is being cancelled; the turn records `aborted` itself."""
        await conn.execute(
            "UPDATE turns SET error = %(reason)s WHERE id = %(id)s AND completed_at IS NULL",
            {"id": turn_id, "reason": reason},
        )

    async def prune_chunks(self, older_than_seconds: float) -> int:
        """Delete the stream chunks of turns that ended more than the retention ago."""
        async with self.db.transaction() as conn:
            cursor = await conn.execute(
                "DELETE FROM stream_chunks c USING turns t WHERE t.id = c.turn_id "
                "AND t.completed_at < now() - make_interval(secs => %(s)s)",
                {"s": older_than_seconds},
            )
            return cursor.rowcount or 0

    # -- the tree (think/storage/_tree.py) -------------------------------------------------

    # The tree's operations take the store as their first argument, so they are its methods
    # as they are, rather than forwarders that would repeat each signature.
    add_messages = _tree.add_messages
    siblings = _tree.siblings
    switch_branch = _tree.switch_branch
    regenerate = _tree.regenerate
