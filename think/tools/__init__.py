"""Tools: the `@tool` decorator and `Tool`, JSON Schemas from type hints, and the built-in
tools an agent may add to `get_tools()`.

    from think.tools import search_history

    class Archivist(Think):
        def get_tools(self) -> list[Tool]:
            return [search_history]
"""

from think.tools._search_history import search_history
from think.tools._tool import Tool, ToolCallIdentity, ToolContext, ToolPolicy, tool

__all__ = ["Tool", "ToolCallIdentity", "ToolContext", "ToolPolicy", "search_history", "tool"]
