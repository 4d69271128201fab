"""Tools: the `@tool` decorator and `Tool`, JSON Schemas from type hints, and the built-in
tools an agent may add to `get_tools()` or switch on with a class attribute; MCP servers
(`McpServer`) whose tools join them.

    from think.tools import search_history

    class Archivist(Think):
        def get_tools(self) -> list[Tool]:
            return [search_history]

- `search_history`: the model searches its own conversation;
- `FetchTools` / `FetchTarget` (`Think.fetch_tools`): allowlisted, SSRF-safe HTTP reads;
- `WORKSPACE_TOOLS` (`Think.workspace_tools = True`): `read`, `ls`, `find`, `grep`,
  `write`, `edit`, `delete` over the conversation's workspace (`current_workspace()`);
- `exec_tool` / `skill_script_tool` (`Think.exec_tools = True`): `exec` and
  `run_skill_script`, programs run in `think.sandbox` over a copy of the workspace;
- `skills` (`Think.get_skills()`): Agent Skills sources, parser and catalog;
- `@action` / `Action` (`Think.get_actions()`): tools whose effects a ledger remembers by
  their domain key (docs/actions.md), `attach_reply` inside one.
"""

from think.storage import Workspace, WorkspaceEntry, WorkspaceFile
from think.tools import skills
from think.tools._action import (
    APPROVAL_KINDS,
    Action,
    ActionContext,
    ActionRunContext,
    ApprovalKind,
    ReplyAttachment,
    action,
    attach_reply,
    collecting_attachments,
    input_hash,
    ledger_key,
)
from think.tools._exec import (
    EXEC,
    RUN_SKILL_SCRIPT,
    exec_tool,
    exec_tool_for,
    skill_script_tool,
)
from think.tools._fetch import DEFAULT_ACCEPT, MODEL_HEADERS, FetchTarget, FetchTools
from think.tools._fetch_guard import (
    AddressRefused,
    Connector,
    GuardedBackend,
    GuardedTransport,
    Resolver,
    system_resolver,
)
from think.tools._fetch_url import (
    DisallowedURL,
    NormalURL,
    address_refusal,
    host_refusal,
    parse_url,
)
from think.tools._mcp import (
    McpServer,
    McpTool,
    McpToolInfo,
    McpUnavailable,
    close_mcp_pool,
    mcp_tools_of,
    warm_mcp_servers,
)
from think.tools._mcp_pool import pool
from think.tools._search_history import search_history
from think.tools._tool import (
    ApprovalPolicy,
    Tool,
    ToolCallIdentity,
    ToolContext,
    ToolPolicy,
    maybe_await,
    tool,
    tool_output_json,
)
from think.tools._workspace import WORKSPACE_TOOLS, current_workspace, media_result

__all__ = [
    "APPROVAL_KINDS",
    "DEFAULT_ACCEPT",
    "EXEC",
    "MODEL_HEADERS",
    "RUN_SKILL_SCRIPT",
    "WORKSPACE_TOOLS",
    "Action",
    "ActionContext",
    "ActionRunContext",
    "AddressRefused",
    "ApprovalKind",
    "ApprovalPolicy",
    "Connector",
    "DisallowedURL",
    "FetchTarget",
    "FetchTools",
    "GuardedBackend",
    "GuardedTransport",
    "McpServer",
    "McpTool",
    "McpToolInfo",
    "McpUnavailable",
    "NormalURL",
    "ReplyAttachment",
    "Resolver",
    "Tool",
    "ToolCallIdentity",
    "ToolContext",
    "ToolPolicy",
    "Workspace",
    "WorkspaceEntry",
    "WorkspaceFile",
    "action",
    "address_refusal",
    "attach_reply",
    "close_mcp_pool",
    "collecting_attachments",
    "current_workspace",
    "exec_tool",
    "exec_tool_for",
    "host_refusal",
    "input_hash",
    "ledger_key",
    "maybe_await",
    "mcp_tools_of",
    "media_result",
    "parse_url",
    "pool",
    "search_history",
    "skill_script_tool",
    "skills",
    "system_resolver",
    "tool",
    "tool_output_json",
    "warm_mcp_servers",
]
