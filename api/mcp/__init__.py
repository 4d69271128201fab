"""The MCP server at `/mcp`: every hosted agent as a tool, a turn as a task (the Tasks
extension), approvals as elicitations; a thin mapping onto the one front door
(`think.server.admit_submission`, `follow`, `cancel_turn`, the approval route's decisions)."""

from api.mcp._endpoint import MCP_HEADERS, McpServer

__all__ = ["MCP_HEADERS", "McpServer"]
