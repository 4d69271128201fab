"""Deleting ended turns' records and their streams (never their messages): one by the
name a client gave it, or a conversation's by status and age."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING

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
) -> list[str]:
    """Delete the conversation's ended turns (of these statuses, submitted before `before`),
    with their streams; active turns are never touched. Returns the deleted ids."""
    active = sorted(set(status) & ACTIVE_STATUSES)
    if active:
        raise UserError(
            f"only ended turns can be deleted; status {active[0]!r} is not an ended status"
        )
    statuses = list(status or TERMINAL_STATUSES)
    async with store.db.transaction() as conn:
        rows = await fetch_all(
            conn,
            "DELETE FROM turns WHERE conversation_uid = %(c)s AND status = ANY(%(s)s) "
            "AND (%(before)s::timestamptz IS NULL OR created_at < %(before)s) RETURNING id",
            {"c": conversation_uid, "s": statuses, "before": before},
        )
        ids = [r["id"] for r in rows]
        if ids:
            await conn.execute(
                "DELETE FROM stream_chunks WHERE turn_id = ANY(%(ids)s)", {"ids": ids}
            )
    return ids
