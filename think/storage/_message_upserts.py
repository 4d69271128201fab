"""`add_messages(mode="upsert")`: messages added without a turn, updated in place when their
id is stored already."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING

from psycopg.types.json import Jsonb

from think._messages import UIMessage, search_text
from think.storage._db import fetch_all

if TYPE_CHECKING:
    from think.storage._store import Store


async def upsert_messages(
    store: Store,
    conversation_uid: str,
    messages: Sequence[UIMessage],
    *,
    parent_id: str | None = None,
) -> list[str]:
    """`add_messages(mode="upsert")`: a message whose id is stored already gets the new role,
    parts and metadata in place (its place in the tree stays); the others are appended, as a
    chain, the way `add_messages` appends. Returns the ids updated in place."""
    ids = [m.id for m in messages]
    async with store.db.transaction() as conn:
        rows = await fetch_all(
            conn,
            "SELECT id FROM messages WHERE conversation_uid = %(c)s AND id = ANY(%(ids)s) "
            "FOR UPDATE",
            {"c": conversation_uid, "ids": ids},
        )
        stored = {r["id"] for r in rows}
        if stored:
            # Cached paths (think.storage._path_cache) holding these messages are stale now.
            await conn.execute(
                "UPDATE conversations SET messages_revision = messages_revision + 1 "
                "WHERE uid = %(c)s",
                {"c": conversation_uid},
            )
        for message in messages:
            if message.id not in stored:
                continue
            parts = message.parts
            await conn.execute(
                "UPDATE messages SET role = %(role)s, parts = %(parts)s, metadata = %(meta)s, "
                "text_content = %(text)s, byte_size = %(size)s "
                "WHERE conversation_uid = %(c)s AND id = %(id)s",
                {
                    "c": conversation_uid,
                    "id": message.id,
                    "role": message.role,
                    "parts": Jsonb(parts),
                    "meta": Jsonb(message.metadata) if message.metadata is not None else None,
                    "text": search_text(parts),
                    "size": len(json.dumps(parts)),
                },
            )
    fresh = [m for m in messages if m.id not in stored]
    if fresh:
        await store.add_messages(conversation_uid, fresh, parent_id=parent_id)
    return [m.id for m in messages if m.id in stored]
