"""A turn's MCP tools: found by its first model step, recorded with the turn, read back by
every later activity.

The first step asks this worker's pool (`think.tools._mcp_pool`) for the tools of the agent's
servers and the conversation's, and stores what it got in the turn's config (`"mcp"`): each
server by name (the agent's by name only, since its description may hold a secret in clear;
a conversation's with its stored description) and each tool with its schema. Later steps and
the tool calls build their `McpTool`s from that record, so every worker of the turn offers
and runs the same tools, whatever the servers say meanwhile.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from pydantic import ValidationError

from think.agent import Think
from think.storage import Store, TurnRecord, conversation_mcp_servers
from think.tools import McpServer, McpToolInfo, Tool, mcp_tools_of

log = logging.getLogger("think.mcp")


def declared_servers(agent: Think) -> list[McpServer]:
    """`get_mcp_servers()`, checked. The caller runs it as agent code (`agent_code`)."""
    servers = list(agent.get_mcp_servers())
    for server in servers:
        if not isinstance(server, McpServer):
            raise TypeError(f"get_mcp_servers returned {server!r}, not an McpServer")
    names = [s.name for s in servers]
    doubles = sorted({n for n in names if names.count(n) > 1})
    if doubles:
        raise TypeError(f"get_mcp_servers returned more than one server named {doubles}")
    return servers


async def discover(
    agent: Think, turn: TurnRecord, store: Store, declared: list[McpServer]
) -> dict[str, Any] | None:
    """The turn's MCP record, from the servers as this worker knows them now: `declared`
    (`declared_servers`, which the caller runs as agent code) and the conversation's; None
    when the agent leaves MCP tools out or has no server at all."""
    if not agent.include_mcp_tools:
        return None
    stored: list[dict[str, Any]] = []
    if turn.conversation_has_mcp_servers:  # else no round trip to find none
        async with store.db.connection() as conn:
            stored = await conversation_mcp_servers(conn, turn.conversation_uid)
    added: list[McpServer] = []
    for spec in stored:
        try:
            server = McpServer.model_validate(spec)
        except ValidationError as exc:
            log.warning("conversation %s: a stored MCP server is unusable: %s", turn.id, exc)
            continue
        if any(s.name == server.name for s in declared):
            continue  # the agent's own server of that name wins
        added.append(server)
    servers = [*declared, *added]
    if not servers:
        return None
    # Imported here: the SDK costs most of a second, paid only by agents that use MCP.
    from think.tools import pool

    found = await asyncio.gather(
        *(pool().tools(s, wait=agent.wait_for_mcp_connections) for s in servers)
    )
    record: dict[str, Any] = {"servers": {}, "tools": []}
    for server, tools in zip(servers, found, strict=True):
        source: dict[str, Any] = {"source": "agent"}
        if server in added:
            source = {"source": "conversation", "spec": server.model_dump(mode="json")}
        record["servers"][server.name] = source
        if tools is None:
            log.info(
                "turn %s: MCP server %s is not connected; its tools sit out", turn.id, server.name
            )
            continue
        record["tools"].extend(t.model_dump(mode="json") for t in tools)
    return record


def recorded_tools(agent: Think, record: dict[str, Any]) -> dict[str, Tool]:
    """The `McpTool`s of a turn's record. Raises what `get_mcp_servers` does."""
    if not agent.include_mcp_tools:
        return {}
    servers: dict[str, McpServer] = {}
    declared: dict[str, McpServer] | None = None
    for name, source in record.get("servers", {}).items():
        if source.get("source") == "conversation":
            servers[name] = McpServer.model_validate(source["spec"])
            continue
        if declared is None:
            declared = {s.name: s for s in declared_servers(agent)}
        if name in declared:
            servers[name] = declared[name]
    infos: dict[str, list[McpToolInfo]] = {}
    for raw in record.get("tools", []):
        info = McpToolInfo.model_validate(raw)
        infos.setdefault(info.server, []).append(info)
    tools: dict[str, Tool] = {}
    for name, listed in infos.items():
        server = servers.get(name)
        if server is None:
            continue  # the agent no longer declares it: its calls find no tool
        tools.update((t.name, t) for t in mcp_tools_of(server, listed))
    return tools
