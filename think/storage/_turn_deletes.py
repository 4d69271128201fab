"""Deleting ended turns' records and their streams (never their messages): one by the
name a client gave it, or a conversation's by status and age."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from psycopg.types.json import Jsonb

from think.exceptions import UserError
from think.storage._db import fetch_all, fetch_one
from think.storage._records import (
    ACTIVE_STATUSES,
    TERMINAL_STATUSES,
    Conversation,
)
from think.storage._turn_ids import turn_id_candidates

if TYPE_CHECKING:
    from think.storage._store import Store


_DELETE_ENDED = """
    DELETE FROM turns WHERE id IN (
        SELECT id FROM turns WHERE conversation_uid = %(c)s AND status = ANY(%(s)s)
          AND (%(before)s::timestamptz IS NULL OR created_at < %(before)s)
        ORDER BY created_at LIMIT %(limit)s FOR UPDATE SKIP LOCKED
    ) RETURNING id, usage, created_at
"""

# One row per model step of each deleted turn, as `record_model_calls` writes a side call's.
_KEEP_USAGE = """
    INSERT INTO model_calls (conversation_uid, turn_id, purpose, usage, created_at)
    SELECT %(c)s, d.id, 'turn', s.step, d.at
    FROM unnest(%(ids)s::text[], %(usage)s::jsonb[], %(at)s::timestamptz[]) AS d(id, usage, at)
    CROSS JOIN LATERAL jsonb_array_elements(
        CASE WHEN jsonb_typeof(d.usage -> 'steps') = 'array' THEN d.usage -> 'steps'
        ELSE '[]'::jsonb END) AS s(step)
"""


class TurnNotFound(UserError):
    def __init__(self, turn_id: str) -> None:
        super().__init__(f"turn {turn_id!r} does not exist in this conversation")
        self.turn_id = turn_id


class TurnStillActive(UserError):
    """Only an ended submission record can be deleted; cancel an active one first."""

    def __init__(self, turn_id: str, status: str) -> None:
        super().__init__(
            f"turn {turn_id!r} is {status}: only an ended turn can be deleted (cancel it first)"
        )
        self.turn_id = turn_id
        self.status = status


async def delete_turn(store: Store, conversation: Conversation, turn_id: str) -> None:
    """Delete an ended turn's record and its stream; never its messages. `turn_id` as the
    client named it (`turn_id_candidates`)."""
    ids = turn_id_candidates(conversation.tenant, turn_id)
    async with store.db.transaction() as conn:
        row = await fetch_one(
            conn,
            "SELECT id, status FROM turns WHERE id = ANY(%(ids)s) AND conversation_uid = %(c)s "
            "FOR UPDATE",
            {"ids": ids, "c": conversation.uid},
        )
        if row is None:
            raise TurnNotFound(turn_id)
        if row["status"] not in TERMINAL_STATUSES:
            raise TurnStillActive(turn_id, row["status"])
        found = {"id": row["id"]}
        await conn.execute("DELETE FROM stream_chunks WHERE turn_id = %(id)s", found)
        await conn.execute("DELETE FROM turns WHERE id = %(id)s", found)


async def delete_turns(
    store: Store,
    conversation_uid: str,
    *,
    status: Sequence[str] = (),
    before: datetime | None = None,
    keep_usage: bool = False,
    limit: int | None = None,
) -> list[str]:
    """Delete the conversation's ended turns (of these statuses, submitted before `before`),
    with their streams; active turns are never touched. Returns the deleted ids.

    `keep_usage` (the retention sweep's): what each deleted turn's model steps spent moves,
    in the same transaction, into `model_calls` (purpose `turn`, the turn's id and creation
    time), so every usage sum and daily budget reads the same before and after
    (`think.storage._usage`). `limit`: at most this many, the oldest first."""
    active = sorted(set(status) & ACTIVE_STATUSES)
    if active:
        raise UserError(
            f"only ended turns can be deleted; status {active[0]!r} is not an ended status"
        )
    statuses = list(status or TERMINAL_STATUSES)
    async with store.db.transaction() as conn:
        params = {"c": conversation_uid, "s": statuses, "before": before, "limit": limit}
        rows = await fetch_all(conn, _DELETE_ENDED, params)
        ids = [r["id"] for r in rows]
        if ids and keep_usage:
            kept = {
                "c": conversation_uid,
                "ids": ids,
                "usage": [Jsonb(r["usage"]) for r in rows],
                "at": [r["created_at"] for r in rows],
            }
            await conn.execute(_KEEP_USAGE, kept)
        if ids:
            await conn.execute(
                "DELETE FROM stream_chunks WHERE turn_id = ANY(%(ids)s)", {"ids": ids}
            )
    return ids
