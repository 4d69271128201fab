"""Messengers' rows (migration 0021): accepted event ids (dedupe), threads → conversations,
deliveries with their stage, and approval buttons. Each write is one statement that says
what it expects (`ON CONFLICT DO NOTHING`, a guarded stage), so a retried webhook, a retried
activity or two racing presses change nothing twice.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal, TypeAlias

from psycopg.types.json import Jsonb
from pydantic import BaseModel

from think.storage._db import Conn, Database, fetch_one

DeliveryStage: TypeAlias = Literal[
    "accepted", "streaming", "completed", "interrupted", "merged", "failed"
]
"""`accepted`: nothing posted yet (a recovery sends the reply); `streaming`: something was
posted (a recovery posts the interruption notice instead of a second partial); `completed`,
`interrupted`, `failed` (the error message was posted), `merged` (the turn was answered by
another turn of the burst, whose delivery posts the reply): ended."""
ENDED: frozenset[str] = frozenset({"completed", "interrupted", "merged", "failed"})


class ThreadRow(BaseModel):
    tenant: str
    agent: str
    messenger: str
    thread_key: str
    chat: str
    thread: str | None
    conversation_id: str
    subscribed: bool


class DeliveryRow(BaseModel):
    id: str
    tenant: str
    agent: str
    messenger: str
    conversation_id: str
    turn_id: str | None
    chat: str
    thread: str | None
    kind: str
    text: str | None
    stage: DeliveryStage
    message_ids: list[str]
    attempts: int
    created_at: datetime

    @property
    def ended(self) -> bool:
        return self.stage in ENDED


class ButtonRow(BaseModel):
    approval_id: str
    delivery_id: str
    turn_id: str
    message_id: str | None


class EventRow(BaseModel):
    turn_id: str | None
    done: bool
    age: float
    """Seconds since it was claimed."""


async def claim_event(conn: Conn, tenant: str, agent: str, messenger: str, event_id: str) -> bool:
    """Claim an event id before handling it; False when it was claimed already (a retry, or a
    copy being handled now)."""
    row = await fetch_one(
        conn,
        "INSERT INTO messenger_events (tenant, agent, messenger, event_id) "
        "VALUES (%(t)s, %(a)s, %(m)s, %(e)s) ON CONFLICT DO NOTHING RETURNING event_id",
        {"t": tenant, "a": agent, "m": messenger, "e": event_id},
    )
    return row is not None


async def get_event(
    conn: Conn, tenant: str, agent: str, messenger: str, event_id: str
) -> EventRow | None:
    row = await fetch_one(
        conn,
        "SELECT turn_id, done, extract(epoch FROM clock_timestamp() - created_at)::float8 AS age "
        "FROM messenger_events WHERE tenant = %(t)s AND agent = %(a)s AND messenger = %(m)s "
        "AND event_id = %(e)s",
        {"t": tenant, "a": agent, "m": messenger, "e": event_id},
    )
    return None if row is None else EventRow.model_validate(row)


async def event_done(
    conn: Conn, tenant: str, agent: str, messenger: str, event_id: str, turn_id: str | None
) -> None:
    """Mark an event handled, with the turn it admitted (None: it admitted none)."""
    await conn.execute(
        "UPDATE messenger_events SET done = true, turn_id = %(turn)s WHERE tenant = %(t)s "
        "AND agent = %(a)s AND messenger = %(m)s AND event_id = %(e)s",
        {"t": tenant, "a": agent, "m": messenger, "e": event_id, "turn": turn_id},
    )


async def count_events(db: Database, tenant: str, agent: str, messenger: str) -> int:
    async with db.connection() as conn:
        row = await fetch_one(
            conn,
            "SELECT count(*) AS n FROM messenger_events "
            "WHERE tenant = %(t)s AND agent = %(a)s AND messenger = %(m)s",
            {"t": tenant, "a": agent, "m": messenger},
        )
    return int(row["n"]) if row else 0


async def get_thread(
    conn: Conn, tenant: str, agent: str, messenger: str, thread_key: str
) -> ThreadRow | None:
    row = await fetch_one(
        conn,
        "SELECT * FROM messenger_threads WHERE tenant = %(t)s AND agent = %(a)s "
        "AND messenger = %(m)s AND thread_key = %(k)s",
        {"t": tenant, "a": agent, "m": messenger, "k": thread_key},
    )
    return None if row is None else ThreadRow.model_validate(row)


async def save_thread(conn: Conn, row: ThreadRow) -> ThreadRow:
    """Record the thread (first message) or subscribe it (a mention): a subscription, once
    made, stays."""
    saved = await fetch_one(
        conn,
        "INSERT INTO messenger_threads (tenant, agent, messenger, thread_key, chat, thread, "
        "conversation_id, subscribed) VALUES (%(tenant)s, %(agent)s, %(messenger)s, "
        "%(thread_key)s, %(chat)s, %(thread)s, %(conversation_id)s, %(subscribed)s) "
        "ON CONFLICT (tenant, agent, messenger, thread_key) DO UPDATE SET subscribed = "
        "messenger_threads.subscribed OR EXCLUDED.subscribed RETURNING *",
        row.model_dump(),
    )
    assert saved is not None
    return ThreadRow.model_validate(saved)


async def thread_of_conversation(
    db: Database, tenant: str, agent: str, conversation_id: str
) -> ThreadRow | None:
    """The thread a conversation answers in (the most recent, if several feed it)."""
    async with db.connection() as conn:
        row = await fetch_one(
            conn,
            "SELECT * FROM messenger_threads WHERE tenant = %(t)s AND agent = %(a)s "
            "AND conversation_id = %(c)s ORDER BY created_at DESC LIMIT 1",
            {"t": tenant, "a": agent, "c": conversation_id},
        )
    return None if row is None else ThreadRow.model_validate(row)


async def create_delivery(conn: Conn, row: DeliveryRow) -> DeliveryRow:
    """Record a delivery (`accepted`), or read the one already recorded for its id or turn."""
    data = row.model_dump(exclude={"stage", "message_ids", "attempts", "created_at"})
    made = await fetch_one(
        conn,
        "INSERT INTO messenger_deliveries (id, tenant, agent, messenger, conversation_id, "
        "turn_id, chat, thread, kind, text) VALUES (%(id)s, %(tenant)s, %(agent)s, "
        "%(messenger)s, %(conversation_id)s, %(turn_id)s, %(chat)s, %(thread)s, %(kind)s, "
        "%(text)s) ON CONFLICT DO NOTHING RETURNING *",
        data,
    )
    if made is None:
        made = await fetch_one(
            conn,
            "SELECT * FROM messenger_deliveries WHERE id = %(id)s OR turn_id = %(turn_id)s",
            data,
        )
    assert made is not None
    return DeliveryRow.model_validate(made)


async def delivery_of_turn(db: Database, turn_id: str) -> DeliveryRow | None:
    async with db.connection() as conn:
        row = await fetch_one(
            conn, "SELECT * FROM messenger_deliveries WHERE turn_id = %(t)s", {"t": turn_id}
        )
    return None if row is None else DeliveryRow.model_validate(row)


async def get_delivery(db: Database, delivery_id: str) -> DeliveryRow | None:
    async with db.connection() as conn:
        row = await fetch_one(
            conn, "SELECT * FROM messenger_deliveries WHERE id = %(id)s", {"id": delivery_id}
        )
    return None if row is None else DeliveryRow.model_validate(row)


async def deliveries_of(db: Database, conversation_id: str) -> list[DeliveryRow]:
    async with db.connection() as conn:
        cursor = await conn.execute(
            "SELECT * FROM messenger_deliveries WHERE conversation_id = %(c)s ORDER BY created_at",
            {"c": conversation_id},
        )
        rows = await cursor.fetchall()
    return [DeliveryRow.model_validate(r) for r in rows]


async def begin_attempt(db: Database, delivery_id: str) -> DeliveryRow | None:
    """Count an attempt at the delivery, and read it as it stands."""
    async with db.connection() as conn:
        row = await fetch_one(
            conn,
            "UPDATE messenger_deliveries SET attempts = attempts + 1, "
            "updated_at = clock_timestamp() WHERE id = %(id)s RETURNING *",
            {"id": delivery_id},
        )
    return None if row is None else DeliveryRow.model_validate(row)


async def move(
    db: Database, delivery_id: str, stage: DeliveryStage, *, expect: tuple[DeliveryStage, ...]
) -> bool:
    """Move the delivery to `stage` if it is at one of `expect`; whether it moved."""
    async with db.connection() as conn:
        row = await fetch_one(
            conn,
            "UPDATE messenger_deliveries SET stage = %(s)s, updated_at = clock_timestamp() "
            "WHERE id = %(id)s AND stage = ANY(%(e)s) RETURNING id",
            {"id": delivery_id, "s": stage, "e": list(expect)},
        )
    return row is not None


async def add_message(db: Database, delivery_id: str, message_id: str) -> None:
    """Note a platform message the delivery posted."""
    async with db.connection() as conn:
        await conn.execute(
            "UPDATE messenger_deliveries SET message_ids = message_ids || %(m)s, "
            "updated_at = clock_timestamp() WHERE id = %(id)s",
            {"id": delivery_id, "m": Jsonb([message_id])},
        )


async def record_button(
    db: Database, approval_id: str, delivery_id: str, turn_id: str, message_id: str | None
) -> None:
    async with db.connection() as conn:
        await conn.execute(
            "INSERT INTO messenger_buttons (approval_id, delivery_id, turn_id, message_id) "
            "VALUES (%(a)s, %(d)s, %(t)s, %(m)s) ON CONFLICT DO NOTHING",
            {"a": approval_id, "d": delivery_id, "t": turn_id, "m": message_id},
        )


async def button_posted(db: Database, approval_id: str) -> ButtonRow | None:
    async with db.connection() as conn:
        row = await fetch_one(
            conn,
            "SELECT * FROM messenger_buttons WHERE approval_id = %(a)s",
            {"a": approval_id},
        )
    return None if row is None else ButtonRow.model_validate(row)
