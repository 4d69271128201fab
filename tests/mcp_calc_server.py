"""A small MCP server over streamable HTTP on 127.0.0.1, written with the SDK's server
framework (FastMCP, named `MCPServer` since mcp 2): arithmetic, the authorization header it
was sent, a slow answer, and a tool that kills the server in the middle of its call.

    python tests/mcp_calc_server.py PORT
"""

from __future__ import annotations

import os
import sys

import anyio
from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("calc", log_level="WARNING")


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def whoami(ctx: Context) -> str:
    """The authorization header of this request."""
    return (ctx.headers or {}).get("authorization", "")


@server.tool()
async def sleep(seconds: float) -> str:
    """Answer after `seconds`."""
    await anyio.sleep(seconds)
    return f"slept {seconds:g} s"


@server.tool()
def crash() -> str:
    """Exit at once, the call unanswered."""
    os._exit(1)


if __name__ == "__main__":
    server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[1]))
