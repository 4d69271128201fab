"""A conversation's dynamic configuration: the JSON object `configure()` stores and
`get_config()` reads (`conversations.config`), and the MCP servers added to it alone
(`conversation_mcp_servers`). Every write is idempotent."""

from __future__ import annotations

from typing import Any

from psycopg.types.json import Jsonb

from think.storage._db import Conn, fetch_one


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
