"""A small MCP server over stdio, written with the SDK's server framework (FastMCP, named
`MCPServer` since mcp 2): notes kept in memory, its process id, a tool that needs approval,
one that adds a tool (and says the list changed), one that adds one quietly, its
environment, and any text by code points.

    python tests/mcp_notes_server.py
"""

from __future__ import annotations

import logging
import os

from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("notes", log_level="WARNING")
notes: list[str] = []


@server.tool()
def remember(text: str) -> str:
    """Keep a note."""
    notes.append(text)
    return f"noted #{len(notes)}"


@server.tool()
def recall() -> list[str]:
    """Every note kept so far, oldest first."""
    return list(notes)


@server.tool()
def pid() -> int:
    """This server's process id."""
    return os.getpid()


@server.tool()
def erase() -> str:
    """Forget every note."""
    notes.clear()
    return "erased"


@server.tool()
async def grow(ctx: Context) -> str:
    """Add the `shout` tool."""

    def shout(text: str) -> str:
        """Say it louder."""
        return text.upper()

    server.add_tool(shout, name="shout")
    await ctx.notify_tools_changed()  # a 2026-07-28 client's subscription
    await ctx.session.send_tool_list_changed()  # notifications/tools/list_changed, for older ones
    return "grown"


@server.tool()
def grow_quietly() -> str:
    """Add the `whisper` tool without saying so."""

    def whisper(text: str) -> str:
        """Say it softer."""
        return text.lower()

    server.add_tool(whisper, name="whisper")
    return "grown"


@server.tool()
def chars(codes: list[int]) -> str:
    """The text of these code points: what a server may answer (a NUL, say)."""
    return "".join(map(chr, codes))


@server.tool()
def env(name: str) -> str | None:
    """The value of an environment variable of this server's process."""
    return os.environ.get(name)


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING)
    server.run()
