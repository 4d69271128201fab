"""Answers to a paused turn, recorded the moment they arrive: a person's approval decision, a
client tool's result.

The gateway records an answer here before it tells the turn's workflow (a Signal, which the
server accepts with no worker running), so the answer is durable at once and a second answer
to the same request finds the first (`turn_answers`' primary key: one answer per request).
The tool-call activity that applies an answer applies the recorded one: whichever answer was
recorded first wins, however the workflow learnt of it (HTTP, the Temporal UI's Signal, an
approval timeout).
"""

from __future__ import annotations

from typing import Any, Literal

from psycopg.types.json import Jsonb

from think.storage._db import Conn, fetch_all, fetch_one

AnswerKind = Literal["approval", "tool-result"]

_INSERT = """
    INSERT INTO turn_answers (turn_id, kind, key, answer)
    VALUES (%(turn)s, %(kind)s, %(key)s, %(answer)s)
    ON CONFLICT DO NOTHING
    RETURNING key
"""
_FIRST = (
    "SELECT answer FROM turn_answers WHERE turn_id = %(turn)s AND kind = %(kind)s AND key = %(key)s"
)


async def record_answer(
    conn: Conn, turn_id: str, kind: AnswerKind, key: str, answer: dict[str, Any]
) -> bool:
    """Record an answer; False when the request already has one (which stands)."""
    row = await fetch_one(
        conn, _INSERT, {"turn": turn_id, "kind": kind, "key": key, "answer": Jsonb(answer)}
    )
    return row is not None


async def first_answer(
    conn: Conn, turn_id: str, kind: AnswerKind, key: str, answer: dict[str, Any]
) -> dict[str, Any]:
    """The answer that stands for the request: the one recorded first, or `answer` (recorded
    now) if there was none."""
    await record_answer(conn, turn_id, kind, key, answer)
    row = await fetch_one(conn, _FIRST, {"turn": turn_id, "kind": kind, "key": key})
    assert row is not None
    return dict(row["answer"])


async def unapplied_answers(conn: Conn, older_than_seconds: float) -> list[dict[str, Any]]:
    """Answers recorded a while ago to turns still paused: their Signal may have been lost
    (Temporal unreachable when they arrived). Rows of turn id, tenant, agent, conversation id, kind,
    answer."""
    return await fetch_all(
        conn,
        "SELECT a.turn_id, c.tenant, t.agent, c.id AS conversation_id, a.kind, a.answer "
        "FROM turn_answers a JOIN turns t ON t.id = a.turn_id "
        "JOIN conversations c ON c.uid = t.conversation_uid "
        "WHERE t.status IN ('awaiting_approval', 'awaiting_client_tool') "
        "AND a.created_at < now() - make_interval(secs => %(s)s) LIMIT 200",
        {"s": older_than_seconds},
    )
