"""Reads and writes of conversations, messages and turns.

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

from sqlalchemy import Row, Table, func, select, text, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from think._messages import UIMessage, new_id, text_of
from think.exceptions import UserError
from think.storage._records import (
    TERMINAL_STATUSES,
    Admission,
    Conversation,
    TurnRecord,
    TurnRequest,
)
from think.storage._tables import ConversationRow, MessageRow, TurnRow


class IdempotencyConflict(UserError):
    """The idempotency key was used before with a different request."""

    def __init__(self, key: str, turn_id: str) -> None:
        super().__init__(
            f"Idempotency-Key {key!r} was already used for a different request (turn {turn_id!r})"
        )
        self.key = key
        self.turn_id = turn_id


class MessageIdConflict(UserError):
    """An input message reuses an id; the tree is append-only, so ids are never rewritten."""

    def __init__(self, message_id: str, reason: str) -> None:
        super().__init__(f"input message id {message_id!r} {reason}")
        self.message_id = message_id


class ParentNotFound(UserError):
    def __init__(self, parent_id: str) -> None:
        super().__init__(f"parent_id {parent_id!r} is not a message of this conversation")
        self.parent_id = parent_id


# Core tables for set-based statements (INSERT ... ON CONFLICT, UPDATE ... RETURNING).
_conv: Table = ConversationRow.__table__  # type: ignore[assignment]  # a Table at runtime
_msg: Table = MessageRow.__table__  # type: ignore[assignment]  # a Table at runtime
_turn: Table = TurnRow.__table__  # type: ignore[assignment]  # a Table at runtime

_PATH_SQL = text(
    """
    WITH RECURSIVE path AS (
        SELECT id, parent_id, role, parts, metadata, 0 AS depth
        FROM messages WHERE conversation_uid = :c AND id = :leaf
      UNION ALL
        SELECT m.id, m.parent_id, m.role, m.parts, m.metadata, p.depth + 1
        FROM messages m JOIN path p ON m.conversation_uid = :c AND m.id = p.parent_id
    )
    SELECT id, role, parts, metadata FROM path ORDER BY depth DESC
    """
)


def _conversation(row: Row[Any]) -> Conversation:
    m = row._mapping
    return Conversation(
        uid=m["uid"],
        tenant=m["tenant"],
        agent=m["agent"],
        id=m["id"],
        created_at=m["created_at"],
        active_leaf_id=m["active_leaf_id"],
        metadata=m["metadata"] or {},
    )


def _turn_record(row: Row[Any]) -> TurnRecord:
    m = dict(row._mapping)
    return TurnRecord(
        id=m["id"],
        conversation_uid=m["conversation_uid"],
        conversation_id=m["conversation_id"],
        tenant=m["tenant"],
        agent=m["agent"],
        idempotency_key=m["idempotency_key"],
        request_hash=m["request_hash"],
        request=TurnRequest.model_validate(m["request"]),
        status=m["status"],
        created_at=m["created_at"],
        started_at=m["started_at"],
        completed_at=m["completed_at"],
        message_id=m["message_id"],
        parent_id=m["parent_id"],
        message=m["message"],
        error=m["error"],
        steps_done=m["steps_done"],
        usage=m["usage"] or {},
    )


def _turn_select() -> Any:
    return select(
        _turn,
        _conv.c.id.label("conversation_id"),
        _conv.c.tenant.label("tenant"),
    ).join(_conv, _conv.c.uid == _turn.c.conversation_uid)


def message_values(conversation_uid: str, message: UIMessage, **extra: Any) -> dict[str, Any]:
    parts = message.parts
    return {
        "conversation_uid": conversation_uid,
        "id": message.id,
        "role": message.role,
        "parts": parts,
        "metadata": message.metadata,
        "text_content": text_of(parts),
        "byte_size": len(json.dumps(parts)),
        **extra,
    }


class Store:
    """The conversation store over one async SQLAlchemy engine (shared, never per request)."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine

    # -- conversations ---------------------------------------------------------------------

    async def ensure_conversation(
        self,
        conn: AsyncConnection,
        *,
        tenant: str,
        agent: str,
        conversation_id: str,
        metadata: dict[str, Any] | None = None,
    ) -> tuple[Conversation, bool]:
        """Get the conversation, creating it first if needed; says whether it was created."""
        inserted = await conn.execute(
            insert(_conv)
            .values(
                uid=str(uuid.uuid4()),
                tenant=tenant,
                agent=agent,
                id=conversation_id,
                metadata=metadata or {},
            )
            .on_conflict_do_nothing(constraint="conversations_name_key")
            .returning(*_conv.c)
        )
        row = inserted.first()
        if row is not None:
            return _conversation(row), True
        existing = await self._find_conversation(conn, tenant, agent, conversation_id)
        assert existing is not None  # the insert conflicted, so the row exists
        return existing, False

    async def create_conversation(
        self, *, tenant: str, agent: str, conversation_id: str, metadata: dict[str, Any]
    ) -> tuple[Conversation, bool]:
        async with self.engine.begin() as conn:
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
        async with self.engine.connect() as conn:
            return await self._find_conversation(conn, tenant, agent, conversation_id)

    async def _find_conversation(
        self, conn: AsyncConnection, tenant: str, agent: str, conversation_id: str
    ) -> Conversation | None:
        result = await conn.execute(
            select(_conv).where(
                _conv.c.tenant == tenant, _conv.c.agent == agent, _conv.c.id == conversation_id
            )
        )
        row = result.first()
        return _conversation(row) if row else None

    # -- messages --------------------------------------------------------------------------

    async def path(
        self, conversation_uid: str, leaf_id: str | None, conn: AsyncConnection | None = None
    ) -> list[UIMessage]:
        """The messages from the root to `leaf_id`, root first."""
        if leaf_id is None:
            return []
        if conn is None:
            async with self.engine.connect() as own:
                return await self.path(conversation_uid, leaf_id, own)
        rows = await conn.execute(_PATH_SQL, {"c": conversation_uid, "leaf": leaf_id})
        return [
            UIMessage(id=r.id, role=r.role, parts=r.parts, metadata=r.metadata)
            for r in rows
            if r.parts
        ]

    async def message_exists(self, conversation_uid: str, message_id: str) -> bool:
        async with self.engine.connect() as conn:
            found = await conn.scalar(
                select(func.count())
                .select_from(_msg)
                .where(_msg.c.conversation_uid == conversation_uid, _msg.c.id == message_id)
            )
            return bool(found)

    # -- turns -----------------------------------------------------------------------------

    async def admit_turn(
        self,
        *,
        tenant: str,
        agent: str,
        conversation_id: str,
        request: TurnRequest,
        request_hash: str,
        idempotency_key: str | None,
    ) -> Admission:
        """Record a submission durably, or find the one this idempotency key already made.

        The unique constraint on (conversation, key) is what makes a storm of identical
        requests produce one turn: every loser's insert waits for the winner's commit, does
        nothing, and then reads the winner's row.
        """
        async with self.engine.begin() as conn:
            conversation, _ = await self.ensure_conversation(
                conn, tenant=tenant, agent=agent, conversation_id=conversation_id
            )
            if idempotency_key is not None:
                # A known key answers before anything else is checked: a retry must get the
                # same answer even if the conversation has moved on since.
                known = await self._turn_by_key(conn, conversation.uid, idempotency_key)
                if known is not None:
                    return self._repeat(known, idempotency_key, request_hash)
            await self._check_request(conn, conversation.uid, request)
            turn_id = new_id("turn")
            inserted = await conn.execute(
                insert(_turn)
                .values(
                    id=turn_id,
                    conversation_uid=conversation.uid,
                    agent=agent,
                    idempotency_key=idempotency_key,
                    request_hash=request_hash,
                    request=request.model_dump(mode="json", exclude_none=True),
                    status="pending",
                    message_id=new_id("msg"),
                )
                .on_conflict_do_nothing(constraint="turns_idempotency_key")
                .returning(_turn.c.id)
            )
            if inserted.first() is not None:
                row = (await conn.execute(_turn_select().where(_turn.c.id == turn_id))).one()
                return Admission(turn=_turn_record(row), accepted=True)
            # Lost a race with an identical concurrent request: its row is committed now.
            assert idempotency_key is not None
            existing = await self._turn_by_key(conn, conversation.uid, idempotency_key)
            assert existing is not None
            return self._repeat(existing, idempotency_key, request_hash)

    async def _turn_by_key(
        self, conn: AsyncConnection, conversation_uid: str, key: str
    ) -> TurnRecord | None:
        row = (
            await conn.execute(
                _turn_select().where(
                    _turn.c.conversation_uid == conversation_uid, _turn.c.idempotency_key == key
                )
            )
        ).first()
        return _turn_record(row) if row else None

    @staticmethod
    def _repeat(existing: TurnRecord, key: str, request_hash: str) -> Admission:
        if existing.request_hash != request_hash:
            raise IdempotencyConflict(key, existing.id)
        return Admission(turn=existing, accepted=False)

    async def _check_request(
        self, conn: AsyncConnection, conversation_uid: str, request: TurnRequest
    ) -> None:
        """Refuse what the turn could not apply later: a missing parent, reused message ids."""
        if request.parent_id is not None:
            found = await conn.scalar(
                select(func.count())
                .select_from(_msg)
                .where(_msg.c.conversation_uid == conversation_uid, _msg.c.id == request.parent_id)
            )
            if not found:
                raise ParentNotFound(request.parent_id)
        ids = [m.id for m in request.messages]
        repeated = sorted({i for i in ids if ids.count(i) > 1})
        if repeated:
            raise MessageIdConflict(repeated[0], "appears twice in the input")
        taken = await conn.scalar(
            select(_msg.c.id)
            .where(_msg.c.conversation_uid == conversation_uid, _msg.c.id.in_(ids))
            .limit(1)
        )
        if taken is not None:
            raise MessageIdConflict(taken, "is already a message of this conversation")

    async def get_turn(
        self, turn_id: str, conversation_uid: str | None = None
    ) -> TurnRecord | None:
        query = _turn_select().where(_turn.c.id == turn_id)
        if conversation_uid is not None:
            query = query.where(_turn.c.conversation_uid == conversation_uid)
        async with self.engine.connect() as conn:
            row = (await conn.execute(query)).first()
        return _turn_record(row) if row else None

    async def list_turns(
        self, conversation_uid: str, *, status: Sequence[str] = (), limit: int = 100
    ) -> list[TurnRecord]:
        query = (
            _turn_select()
            .where(_turn.c.conversation_uid == conversation_uid)
            .order_by(_turn.c.created_at.desc(), _turn.c.id.desc())
            .limit(limit)
        )
        if status:
            query = query.where(_turn.c.status.in_(list(status)))
        async with self.engine.connect() as conn:
            rows = (await conn.execute(query)).all()
        return [_turn_record(r) for r in rows]

    async def lock_turn(self, conn: AsyncConnection, turn_id: str) -> TurnRecord:
        row = (
            await conn.execute(
                _turn_select().where(_turn.c.id == turn_id).with_for_update(of=_turn)
            )
        ).first()
        if row is None:
            raise UserError(f"turn {turn_id!r} does not exist")
        return _turn_record(row)

    async def update_turn(self, conn: AsyncConnection, turn_id: str, **values: Any) -> None:
        await conn.execute(update(_turn).where(_turn.c.id == turn_id).values(**values))

    async def set_active_leaf(
        self, conn: AsyncConnection, conversation_uid: str, leaf_id: str
    ) -> None:
        await conn.execute(
            update(_conv).where(_conv.c.uid == conversation_uid).values(active_leaf_id=leaf_id)
        )

    async def insert_messages(
        self,
        conn: AsyncConnection,
        conversation_uid: str,
        messages: Sequence[UIMessage],
        *,
        parent_id: str | None,
        turn_id: str | None,
    ) -> str | None:
        """Append `messages` as a chain under `parent_id`; returns the id of the last one.

        A message id that already exists is left as it is, so a retried activity is harmless.
        """
        last = parent_id
        for message in messages:
            inserted = await conn.execute(
                insert(_msg)
                .values(message_values(conversation_uid, message, parent_id=last, turn_id=turn_id))
                .on_conflict_do_nothing()
                .returning(_msg.c.id)
            )
            if inserted.first() is None:
                owner = await conn.scalar(
                    select(_msg.c.turn_id).where(
                        _msg.c.conversation_uid == conversation_uid, _msg.c.id == message.id
                    )
                )
                if owner != turn_id or turn_id is None:
                    # Another queued turn took this id after we were admitted: keep the
                    # content under a fresh id rather than drop it.
                    message = message.model_copy(update={"id": new_id("msg")})
                    await conn.execute(
                        insert(_msg).values(
                            message_values(
                                conversation_uid, message, parent_id=last, turn_id=turn_id
                            )
                        )
                    )
            last = message.id
        return last

    async def conversation_by_uid(self, conn: AsyncConnection, uid: str) -> Conversation:
        row = (await conn.execute(select(_conv).where(_conv.c.uid == uid))).one()
        return _conversation(row)

    async def prune_chunks(self, older_than_seconds: float) -> int:
        """Delete the stream chunks of turns that ended more than the retention ago."""
        async with self.engine.begin() as conn:
            result = await conn.execute(
                text(
                    "DELETE FROM stream_chunks c USING turns t WHERE t.id = c.turn_id "
                    "AND t.completed_at < now() - make_interval(secs => :s)"
                ),
                {"s": older_than_seconds},
            )
            return result.rowcount or 0

    @staticmethod
    def terminal(status: str) -> bool:
        return status in TERMINAL_STATUSES
