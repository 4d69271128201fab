"""MCP servers an agent connects to, and their tools as `Tool`s.

`McpServer` is plain data (what to start or where to connect, and how its calls run), so a
turn can record which servers it uses and any worker can reach the same ones. `McpTool` is one
tool a server listed, under the name `<server>_<tool>`: its JSON Schema is the server's,
checked with `jsonschema` before the call (a bad call goes back to the model as a tool error
without reaching the server), and its call goes through this worker's connection pool
(`think.tools._mcp_pool`).
"""

from __future__ import annotations

import copy
import logging
import os
import re
import sys
from typing import Any, Literal

import jsonschema
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from think.exceptions import ToolError, UserError
from think.models import ToolSpec
from think.tools._tool import Tool, ToolContext, ToolPolicy

_SERVER_NAME = re.compile(r"^[A-Za-z0-9-]{1,32}$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_MODEL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_NOT_IN_NAMES = re.compile(r"[^A-Za-z0-9_-]")

log = logging.getLogger("think.mcp")


class McpServer(BaseModel):
    """One MCP server: a command to run over stdio, or a streamable HTTP endpoint.

    Build one with `McpServer.stdio(...)` or `McpServer.http(...)`. Secrets belong in the
    worker's environment: `env_from` and `headers_from_env` map a child variable or a header
    to the name of an environment variable the worker reads when it connects, so that what is
    stored (a turn's record, a conversation's servers) never holds them in clear.

    `needs_approval` is True (every tool of the server waits for a person), False, or the
    server's names of the tools that do. `timeout_seconds` bounds each call;
    `connect_timeout_seconds` bounds a connection (and how long a step with
    `wait_for_mcp_connections` waits for one); the tool list is fetched again when the server
    says it changed, and at the latest `refresh_seconds` after it was fetched. `retries`:
    extra attempts of a call that did not reach the server, `retry_backoff` apart.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    transport: Literal["stdio", "http"]
    command: str | None = None
    args: tuple[str, ...] = ()
    env: dict[str, str] = Field(default_factory=dict)
    env_from: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    headers_from_env: dict[str, str] = Field(default_factory=dict)
    needs_approval: bool | tuple[str, ...] = False
    timeout_seconds: float = Field(default=60.0, gt=0, allow_inf_nan=False)
    connect_timeout_seconds: float = Field(default=10.0, gt=0, allow_inf_nan=False)
    refresh_seconds: float = Field(default=300.0, gt=0, allow_inf_nan=False)
    retries: int = Field(default=0, ge=0)
    """Extra attempts of a call that could not reach the server (never of one the server
    answered, error or not); 0 by default, since a server that died during a call may have
    done its work."""
    retry_backoff: float = Field(default=2.0, ge=1, allow_inf_nan=False)
    protocol: Literal["auto", "legacy"] = "auto"
    """"auto": the SDK asks for the 2026-07-28 protocol and falls back to the initialize
    handshake of older servers; "legacy" starts with that handshake, for a server that
    mishandles the probe."""

    @field_validator("name")
    @classmethod
    def _check_name(cls, name: str) -> str:
        if not _SERVER_NAME.match(name):
            raise ValueError(
                f"MCP server name {name!r} must be 1 to 32 letters, digits or '-' (its tools "
                "are named <server>_<tool>, which models accept up to 64 characters)"
            )
        return name

    @field_validator("env_from", "headers_from_env")
    @classmethod
    def _check_env_names(cls, names: dict[str, str]) -> dict[str, str]:
        for key, variable in names.items():
            if not _ENV_NAME.match(variable):
                raise ValueError(
                    f"{key!r} -> {variable!r}: the value must be the name of an environment "
                    "variable (letters, digits and '_'), not the secret itself"
                )
        return names

    @model_validator(mode="after")
    def _check_transport(self) -> McpServer:
        if self.transport == "stdio" and not self.command:
            raise ValueError("a stdio MCP server needs a command")
        if self.transport == "http" and not (self.url or "").startswith(("http://", "https://")):
            raise ValueError(f"an HTTP MCP server needs an http(s) url, not {self.url!r}")
        return self

    @classmethod
    def stdio(
        cls,
        name: str,
        *,
        command: str,
        args: list[str] | tuple[str, ...] = (),
        env: dict[str, str] | None = None,
        env_from: dict[str, str] | None = None,
        cwd: str | None = None,
        **options: Any,
    ) -> McpServer:
        """A server the worker starts as a child process and talks to over stdin/stdout.
        The child's environment is the SDK's short list of harmless variables (`PATH`,
        `HOME`, ...), `env`, and `env_from` (read from the worker's environment)."""
        return _build(
            name=name,
            transport="stdio",
            command=command,
            args=tuple(args),
            env=env or {},
            env_from=env_from or {},
            cwd=cwd,
            **options,
        )

    @classmethod
    def http(
        cls,
        name: str,
        *,
        url: str,
        headers: dict[str, str] | None = None,
        headers_from_env: dict[str, str] | None = None,
        **options: Any,
    ) -> McpServer:
        """A server at a streamable HTTP endpoint (`https://host/mcp`)."""
        return _build(
            name=name,
            transport="http",
            url=url,
            headers=headers or {},
            headers_from_env=headers_from_env or {},
            **options,
        )

    def tool_needs_approval(self, tool: str) -> bool:
        if isinstance(self.needs_approval, bool):
            return self.needs_approval
        return tool in self.needs_approval

    def resolved_env(self) -> dict[str, str]:
        """What the child gets besides the SDK's short list of harmless variables (`PATH`,
        `HOME`, ...): `env`, and `env_from` read now. Never the rest of the worker's
        environment, which holds its own secrets (the database's, the model's)."""
        return {**self.env, **_read_env(self, self.env_from)}

    def resolved_headers(self) -> dict[str, str]:
        return {**self.headers, **_read_env(self, self.headers_from_env)}

    def check_storable(self) -> None:
        """Refuse what would put a secret in the database: clear `env` or `headers`."""
        clear = [f for f in ("env", "headers") if getattr(self, f)]
        if clear:
            raise UserError(
                f"MCP server {self.name!r}: a server stored with the conversation cannot carry "
                f"{' or '.join(clear)} in clear; name environment variables of the worker "
                "instead (env_from={'TOKEN': 'MY_TOKEN'}, "
                "headers_from_env={'authorization': 'MY_AUTH_HEADER'})"
            )


def _build(**fields: Any) -> McpServer:
    try:
        return McpServer(**fields)
    except ValueError as exc:  # pydantic's ValidationError is one
        raise UserError(f"McpServer {fields.get('name')!r}: {exc}") from None


def _read_env(server: McpServer, names: dict[str, str]) -> dict[str, str]:
    values = {}
    for key, variable in names.items():
        value = os.environ.get(variable)
        if value is None:
            raise ToolError(
                f"MCP server {server.name!r} needs the environment variable {variable!r} "
                f"(for {key!r}), which this worker does not have"
            )
        values[key] = value
    return values


class McpToolInfo(BaseModel):
    """A tool as its server listed it: what a turn records."""

    model_config = ConfigDict(frozen=True)

    server: str
    name: str
    description: str = ""
    input_schema: dict[str, Any] = Field(default_factory=lambda: {"type": "object"})


class McpUnavailable(ToolError):
    """The server cannot be reached now: its tools fail with this, as tool errors, after the
    server's `retries`."""

    retryable = True


def mcp_tool_name(server: str, tool: str) -> str:
    """`<server>_<tool>`, with what models do not accept in a name (MCP allows `.` and `/`)
    as `_`; the server is still called by its own name for the tool."""
    return f"{server}_{_NOT_IN_NAMES.sub('_', tool)}"


def mcp_tools_of(server: McpServer, infos: list[McpToolInfo]) -> list[McpTool]:
    """The server's tools as `McpTool`s; one whose name cannot be given to a model (too long,
    or the same as another's once cleaned) is left out, with a warning."""
    tools: dict[str, McpTool] = {}
    for info in infos:
        name = mcp_tool_name(server.name, info.name)
        if not _MODEL_NAME.match(name) or name in tools:
            log.warning(
                "MCP server %s: tool %r left out: %r is too long for a model or taken",
                server.name,
                info.name,
                name,
            )
            continue
        tools[name] = McpTool(server, info)
    return list(tools.values())


class McpTool(Tool):
    """A server's tool, as the model sees it and as a tool-call activity runs it."""

    def __init__(self, server: McpServer, info: McpToolInfo) -> None:
        # Not `Tool.__init__`: there is no Python function, the server holds the schema.
        self.server = server
        self.info = info
        self.name = mcp_tool_name(server.name, info.name)
        self.description = info.description.strip()
        self.needs_approval = server.tool_needs_approval(info.name)
        self.policy = ToolPolicy(
            timeout_seconds=server.timeout_seconds + server.connect_timeout_seconds,
            max_attempts=server.retries + 1,
            retry_backoff=server.retry_backoff,
            needs_approval=self.needs_approval,
        )
        self.context_param = None
        self.fn = self._call_server
        schema = copy.deepcopy(info.input_schema) or {"type": "object"}
        schema.setdefault("type", "object")
        if schema.get("type") == "object":
            schema.setdefault("properties", {})
        self._schema = schema
        self._validator: Any = None

    @property
    def spec(self) -> ToolSpec:
        return ToolSpec(
            name=self.name, description=self.description, parameters=copy.deepcopy(self._schema)
        )

    def validate(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """Check the model's arguments against the server's schema; `ToolError` if they do
        not match (the server never sees the call)."""
        if self._validator is None:
            cls = jsonschema.validators.validator_for(self._schema)
            try:
                cls.check_schema(self._schema)
            except jsonschema.SchemaError as exc:
                raise ToolError(
                    f"MCP server {self.server.name!r} gave tool {self.info.name!r} an invalid "
                    f"input schema: {exc.message}"
                ) from None
            self._validator = cls(self._schema)
        errors = sorted(self._validator.iter_errors(arguments), key=lambda e: list(e.path))
        if errors:
            problems = [
                f"{'.'.join(str(p) for p in e.absolute_path) or 'arguments'}: {e.message}"
                for e in errors[:5]
            ]
            raise ToolError(f"invalid arguments for tool {self.name!r}: " + "; ".join(problems))
        return dict(arguments)

    async def _call_server(self, **arguments: Any) -> Any:
        # Imported here, not at the top: the SDK costs most of a second to import, which a
        # process that never calls an MCP tool (a gateway, `think chat`) should not pay.
        from think.tools._mcp_pool import pool

        return await pool().call(self.server, self.info.name, arguments)

    async def __call__(self, context: ToolContext | None = None, /, **kwargs: Any) -> Any:
        return await self._call_server(**kwargs)

    def __repr__(self) -> str:
        return f"McpTool({self.name!r})"


def warm_mcp_servers(servers: list[McpServer]) -> None:
    """Start connecting to `servers` in the background (a worker, as it starts, for its
    agents' servers), so a first turn that does not wait for connections has their tools."""
    if not servers:
        return
    from think.tools._mcp_pool import pool  # see `McpTool._call_server`

    for server in servers:
        pool().connection(server).start()


async def close_mcp_pool() -> None:
    """Close this event loop's MCP connections (stdio servers exit); nothing to do when no
    MCP server was ever used, in which case the SDK is not even imported."""
    module = sys.modules.get("think.tools._mcp_pool")
    if module is not None:
        await module.close_pool()
