"""A conversation's dynamic configuration, frozen system prompt and memory blocks.

- `conversations.config`: the JSON object `configure()` stores and `get_config()` reads.
- `conversations.system_prompt`: the system prompt as assembled from the agent's instructions
  and context blocks, sent byte for byte on every step until it is rebuilt; NULL asks the next
  model step to build it (`clear_system_prompt`, after compaction or on request).
- `context_blocks` (migration 0006), one row per block label: `content`, what the model wrote
  to a memory block through `set_context`; `frozen`, the fingerprint of the content the frozen
  prompt was built with, which tells a changed block from an unchanged one.

Every write is idempotent: a retried activity writes the same values again.
"""

from __future__ import annotations

from typing import Any

from psycopg.types.json import Jsonb
from pydantic import BaseModel

from think.storage._db import Conn, fetch_one


class PromptState(BaseModel):
    """What a model step needs to reuse, or rebuild, the frozen system prompt."""

    system_prompt: str | None
    memory: dict[str, str]
    """Memory block contents by label, for the blocks ever written."""
    frozen: dict[str, str]
    """Fingerprints of the block contents the frozen prompt was built with, by label."""


_PROMPT_STATE = """
    SELECT c.system_prompt,
           (SELECT coalesce(jsonb_object_agg(b.label, jsonb_build_array(b.content, b.frozen)),
                            '{}')
            FROM context_blocks b WHERE b.conversation_uid = c.uid) AS blocks
    FROM conversations c WHERE c.uid = %(c)s
"""

_FREEZE_BLOCKS = """
    INSERT INTO context_blocks (conversation_uid, label, frozen)
    SELECT %(c)s, f.key, f.value FROM jsonb_each_text(%(frozen)s) AS f
    ON CONFLICT (conversation_uid, label) DO UPDATE SET frozen = EXCLUDED.frozen
"""

_WRITE_MEMORY = """
    INSERT INTO context_blocks (conversation_uid, label, content)
    VALUES (%(c)s, %(label)s, %(content)s)
    ON CONFLICT (conversation_uid, label)
    DO UPDATE SET content = EXCLUDED.content, updated_at = now()
"""


async def conversation_config(conn: Conn, conversation_uid: str) -> dict[str, Any]:
    """The conversation's configuration (`{}` when never configured)."""
    row = await fetch_one(
        conn, "SELECT config FROM conversations WHERE uid = %(c)s", {"c": conversation_uid}
    )
    return dict(row["config"] or {}) if row else {}


async def set_conversation_config(
    conn: Conn, conversation_uid: str, config: dict[str, Any]
) -> None:
    await conn.execute(
        "UPDATE conversations SET config = %(config)s WHERE uid = %(c)s",
        {"c": conversation_uid, "config": Jsonb(config)},
    )


async def conversation_mcp_servers(conn: Conn, conversation_uid: str) -> list[dict[str, Any]]:
    """The MCP servers added to the conversation (`Think.add_mcp_server`), oldest first, as
    stored: the caller validates them."""
    cur = await conn.execute(
        "SELECT spec FROM conversation_mcp_servers WHERE conversation_uid = %(c)s "
        "ORDER BY created_at, name",
        {"c": conversation_uid},
    )
    return [dict(row["spec"]) for row in await cur.fetchall()]


async def put_conversation_mcp_server(
    conn: Conn, conversation_uid: str, name: str, spec: dict[str, Any]
) -> None:
    """Add or replace (by name) an MCP server of the conversation."""
    await conn.execute(
        "INSERT INTO conversation_mcp_servers (conversation_uid, name, spec) "
        "VALUES (%(c)s, %(name)s, %(spec)s) "
        "ON CONFLICT (conversation_uid, name) DO UPDATE SET spec = EXCLUDED.spec",
        {"c": conversation_uid, "name": name, "spec": Jsonb(spec)},
    )


async def delete_conversation_mcp_server(conn: Conn, conversation_uid: str, name: str) -> bool:
    cur = await conn.execute(
        "DELETE FROM conversation_mcp_servers WHERE conversation_uid = %(c)s AND name = %(name)s",
        {"c": conversation_uid, "name": name},
    )
    return cur.rowcount > 0


async def prompt_state(conn: Conn, conversation_uid: str) -> PromptState:
    row = await fetch_one(conn, _PROMPT_STATE, {"c": conversation_uid})
    blocks: dict[str, list[str | None]] = row["blocks"] if row else {}
    return PromptState(
        system_prompt=row["system_prompt"] if row else None,
        memory={label: v[0] for label, v in blocks.items() if v[0] is not None},
        frozen={label: v[1] for label, v in blocks.items() if v[1] is not None},
    )


async def freeze_prompt(
    conn: Conn, conversation_uid: str, system_prompt: str, frozen: dict[str, str]
) -> None:
    """Store a freshly built system prompt with the fingerprints of the blocks in it."""
    await conn.execute(
        "UPDATE conversations SET system_prompt = %(p)s WHERE uid = %(c)s",
        {"c": conversation_uid, "p": system_prompt},
    )
    await conn.execute(_FREEZE_BLOCKS, {"c": conversation_uid, "frozen": Jsonb(frozen)})


async def clear_system_prompt(conn: Conn, conversation_uid: str) -> None:
    """Drop the frozen system prompt: the conversation's next model step builds it again, from
    the agent's instructions and the blocks' current content."""
    await conn.execute(
        "UPDATE conversations SET system_prompt = NULL WHERE uid = %(c)s", {"c": conversation_uid}
    )


async def write_memory(conn: Conn, conversation_uid: str, label: str, content: str) -> None:
    """Replace the content of a memory block (checked against its limits by the caller)."""
    await conn.execute(_WRITE_MEMORY, {"c": conversation_uid, "label": label, "content": content})


async def read_memory(conn: Conn, conversation_uid: str) -> dict[str, str]:
    """The memory blocks written so far, by label."""
    return (await prompt_state(conn, conversation_uid)).memory
