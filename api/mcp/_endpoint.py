"""`/mcp`: the official SDK's streamable-HTTP transport behind the gateway's own API keys.

One `StreamableHTTPSessionManager` serves both eras from one URL: a request whose
`MCP-Protocol-Version` header names a 2026-07-28 revision is served statelessly by the SDK's
per-request envelope path; anything else (the `initialize` handshake of 2024-11-05 to
2025-11-25 clients, and their later requests) by stateful sessions, which the manager binds
to the key that opened them. The manager's task group runs inside the gateway's lifespan
(`McpServer.run`), so it starts and stops with the app.

The endpoint authenticates each HTTP request exactly as `/v1` does (`api.deps.principal_of`)
and answers 401 with `WWW-Authenticate: Bearer` before the SDK sees it; the handlers read the
caller from the request's scope (`_turns.caller_of`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.lowlevel.server import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from mcp_types import CallToolRequestParams, PaginatedRequestParams
from starlette.datastructures import Headers
from starlette.types import Receive, Scope, Send

from api.deps import Resources, principal_of
from api.errors import problem_response
from api.mcp import _tasks, _tools
from api.mcp._turns import PRINCIPAL

MCP_HEADERS = ("Mcp-Session-Id", "MCP-Protocol-Version", "Mcp-Method", "Mcp-Name")
"""The request headers MCP's streamable HTTP sends, which a browser client's CORS preflight
must be allowed (with `THINK_CORS_ORIGINS`)."""


def build_server() -> Server:
    """The lowlevel server: its tools are the registry's agents, looked up per request."""
    server: Server = Server(
        "think",
        version="1",
        instructions="Each tool is an agent: send it a message, and continue a conversation "
        "with the conversation_id its result carries in _meta['io.think/conversation_id'].",
    )
    server.add_request_handler("tools/list", PaginatedRequestParams, _tools.list_tools)
    server.add_request_handler("tools/call", CallToolRequestParams, _tools.call_tool)
    server.add_request_handler("tasks/get", _tasks.TaskParams, _tasks.get_task)
    server.add_request_handler("tasks/update", _tasks.UpdateTaskParams, _tasks.update_task)
    server.add_request_handler("tasks/cancel", _tasks.TaskParams, _tasks.cancel_task)
    server.extensions = {_tasks.TASKS: {}}
    return server


class McpServer:
    """The `/mcp` endpoint (an ASGI app) and the session manager behind it."""

    def __init__(self, max_body_bytes: int) -> None:
        self.server = build_server()
        self.manager = StreamableHTTPSessionManager(
            app=self.server,
            # The gateway has its own CORS policy and serves behind the operator's host names;
            # the SDK's localhost-only Host check would refuse a deployment's.
            security_settings=TransportSecuritySettings(enable_dns_rebinding_protection=False),
            max_request_body_size=max_body_bytes,
        )

    @asynccontextmanager
    async def run(self) -> AsyncIterator[None]:
        """The manager's task group, for the gateway's lifespan."""
        async with self.manager.run():
            yield

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":  # pragma: no cover - routed for HTTP only
            return
        resources: Resources = scope["app"].state.resources
        header = Headers(scope=scope).get("authorization", "")
        principal = principal_of(resources.settings, header)
        if principal is None:
            response = problem_response(
                401, "a valid `Authorization: Bearer <key>` header is required"
            )
            response.headers["WWW-Authenticate"] = 'Bearer realm="think"'
            await response(scope, receive, send)
            return
        # As an authenticated user, so the SDK binds a 2025 session to the key that opened
        # it: another key naming its session id is told it does not exist.
        token = AccessToken(token="", client_id=f"{principal.tenant}/{principal.label}", scopes=[])
        scope = {**scope, "user": AuthenticatedUser(token), PRINCIPAL: principal}
        await self.manager.handle_request(scope, receive, send)
