"""Compaction summaries, stored beside the messages they stand in for (migration 0005).

A summary is an overlay: "for the model, the messages from `first_message_id` to
`last_message_id` read as `summary`". Nothing here changes a message, so every message stays
readable (`GET …/messages`) and every branch keeps its own history: an overlay applies to a
path only when its last message lies on that path, and then its first message does too (the
path from the root to a message is unique).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from pydantic import BaseModel

from think.storage._db import Conn, fetch_all, fetch_one
from think.storage._frozen_prompt import clear_system_prompt

_COLUMNS = (
    "id, first_message_id, last_message_id, summary, tokens_before, tokens_after, trigger, "
    "turn_id, created_at"
)

# All of the conversation's summaries, filtered against the path in Python: there are few
# (one per compaction), while a path may hold thousands of ids.
_OF_CONVERSATION = f"""
    SELECT {_COLUMNS} FROM compactions WHERE conversation_uid = %(c)s ORDER BY id
"""

_INSERT = f"""
    INSERT INTO compactions (conversation_uid, first_message_id, last_message_id, summary,
                             tokens_before, tokens_after, trigger, turn_id)
    VALUES (%(c)s, %(first)s, %(last)s, %(summary)s, %(before)s, %(after)s, %(trigger)s,
            %(turn)s)
    ON CONFLICT ON CONSTRAINT compactions_span_key DO NOTHING
    RETURNING {_COLUMNS}
"""

_TURN_COUNT = """
    SELECT count(*) AS n FROM compactions WHERE turn_id = %(turn)s AND trigger = %(trigger)s
"""


class Compaction(BaseModel):
    """A stored summary of the messages `first_message_id` … `last_message_id` of a path."""

    id: int
    first_message_id: str
    last_message_id: str
    summary: str
    tokens_before: int
    """What the span cost the model before (by the session's token counter)."""
    tokens_after: int
    """What the summary costs instead."""
    trigger: str
    """`between_turns`, `proactive`, `reactive` or `manual`."""
    turn_id: str | None = None
    """The turn that compacted (None: on demand, from `ConversationHandle.compact()`)."""
    created_at: datetime


async def summaries_on_path(
    conn: Conn, conversation_uid: str, message_ids: Sequence[str]
) -> list[Compaction]:
    """The summaries whose last message is one of `message_ids` (a path), oldest first."""
    if not message_ids:
        return []
    on_path = set(message_ids)
    rows = await fetch_all(conn, _OF_CONVERSATION, {"c": conversation_uid})
    return [Compaction.model_validate(r) for r in rows if r["last_message_id"] in on_path]


async def insert_summary(
    conn: Conn,
    conversation_uid: str,
    *,
    first_message_id: str,
    last_message_id: str,
    summary: str,
    tokens_before: int,
    tokens_after: int,
    trigger: str,
    turn_id: str | None,
) -> Compaction | None:
    """Store a summary; None when the span already has one (a retry, or no progress)."""
    row = await fetch_one(
        conn,
        _INSERT,
        {
            "c": conversation_uid,
            "first": first_message_id,
            "last": last_message_id,
            "summary": summary,
            "before": tokens_before,
            "after": tokens_after,
            "trigger": trigger,
            "turn": turn_id,
        },
    )
    if row is None:
        return None
    # The history's prefix changes here anyway: let the next model step rebuild the frozen
    # system prompt too, folding in context blocks changed since
    # (think/sessions/_context_blocks.py).
    await clear_system_prompt(conn, conversation_uid)
    return Compaction.model_validate(row)


async def turn_compactions(conn: Conn, turn_id: str, trigger: str) -> int:
    """How many summaries `turn_id` stored with this trigger (the overflow budgets)."""
    row = await fetch_one(conn, _TURN_COUNT, {"turn": turn_id, "trigger": trigger})
    return int(row["n"]) if row else 0
