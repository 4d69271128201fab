"""Tools: the `@tool` decorator and `Tool`, JSON Schemas from type hints, and the built-in
tools an agent may add to `get_tools()`; MCP servers (`McpServer`) whose tools join them.

    from think.tools import search_history

    class Archivist(Think):
        def get_tools(self) -> list[Tool]:
            return [search_history]
"""

from think.tools._mcp import (
    McpServer,
    McpTool,
    McpToolInfo,
    McpUnavailable,
    close_mcp_pool,
    mcp_tools_of,
    warm_mcp_servers,
)
from think.tools._search_history import search_history
from think.tools._tool import Tool, ToolCallIdentity, ToolContext, ToolPolicy, tool

__all__ = [
    "McpServer",
    "McpTool",
    "McpToolInfo",
    "McpUnavailable",
    "Tool",
    "ToolCallIdentity",
    "ToolContext",
    "ToolPolicy",
    "close_mcp_pool",
    "mcp_tools_of",
    "search_history",
    "tool",
    "warm_mcp_servers",
]
