"""This process's connections to MCP servers: one per server, shared by every activity.

Each connection lives in a task of its own, which holds the SDK's `Client` open (the SDK's
transports run in anyio task groups that must be entered and left by one task, and whose
failure cancels that task: a caller's activity must never be the one cancelled). Callers
borrow the open client. A connection that ends (the child process exited, the HTTP server
went away, its change subscription dropped) or fails a call is dropped, and the next use
opens a new one, so a restarted server is picked up again by itself.

The tool list of each server is kept with its connection, fetched again when the server
says it changed (`notifications/tools/list_changed`, or a `ToolsListChanged` event on a
2026-07-28 connection) and at the latest `refresh_seconds` after the last fetch.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import TYPE_CHECKING, Any

import anyio
import httpx2

from think._messages import storable, storable_text
from think.exceptions import ToolError
from think.tools._mcp import McpToolInfo, McpUnavailable

if TYPE_CHECKING:
    # The SDK is imported where a connection is made, not here: `mcp` and `mcp_types` took
    # 1.1 s to import, which every worker paid at its start, MCP servers or none.
    from mcp import Client, StdioServerParameters
    from mcp_types import CallToolResult

    from think.tools._mcp import McpServer

log = logging.getLogger("think.mcp")

_RECONNECT_PAUSE_SECONDS = 1.0
"""A server that just failed to connect is not tried again sooner by a caller that does not
wait (a turn without `wait_for_mcp_connections`), so a down server costs no retry storm."""
_MAX_PAGES = 100
_TRANSPORT_ERRORS = (
    OSError,
    httpx2.HTTPError,
    anyio.ClosedResourceError,
    anyio.BrokenResourceError,
    anyio.EndOfStream,
    BaseExceptionGroup,
)
"""What a broken connection raises from a call, beyond the SDK's `CONNECTION_CLOSED`."""
IDLE_SECONDS = 600.0
"""A connection unused this long is closed (a stdio child exits); its tool list is kept, and
the next use connects again. Servers added to many conversations do not pile up."""


def _describe(exc: BaseException) -> str:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


class _Runner:
    """One life of a connection: its task, and the events and client of that life only, so
    that a life that is still closing never touches the next one's."""

    def __init__(self) -> None:
        self.ready = asyncio.Event()
        self.stop = asyncio.Event()
        self.client: Client | None = None
        self.task: asyncio.Task[None] | None = None
        self.started_at = time.monotonic()

    @property
    def running(self) -> bool:
        """Connecting, or connected: not stopped, not failed, not ended."""
        return (
            self.task is not None
            and not self.task.done()
            and not self.stop.is_set()
            and not (self.ready.is_set() and self.client is None)
        )


class _Connection:
    def __init__(self, server: McpServer) -> None:
        self.server = server
        self.tools: list[McpToolInfo] | None = None
        """The last list fetched, kept while the server is down (its calls fail then)."""
        self.listed_at = 0.0
        self.stale = False
        self.error: str | None = None
        self.failed_at = 0.0
        self.used_at = time.monotonic()
        self._runner: _Runner | None = None
        self._closing: set[asyncio.Task[None]] = set()
        self._refreshing: asyncio.Task[None] | None = None

    @property
    def client(self) -> Client | None:
        runner = self._runner
        if runner is None or not runner.running or runner.client is None:
            return None
        if _closed(runner.client):
            # The server went away (a child's EOF) and no subscription said so yet (there is
            # none on an older protocol): let this life end, and the caller open the next.
            self.drop("its server closed the connection")
            return None
        return runner.client

    @property
    def alive(self) -> bool:
        return self.client is not None

    def start(self) -> None:
        """Connect, unless connecting or connected already. A life that is still closing
        (dropped, or its server gone) closes on its own while the next one connects."""
        old = self._runner
        if old is not None and old.running:
            return
        if old is not None and old.task is not None and not old.task.done():
            old.stop.set()
            self._closing.add(old.task)
            old.task.add_done_callback(self._closing.discard)
        runner = self._runner = _Runner()
        runner.task = asyncio.create_task(self._run(runner), name=f"mcp {self.server.name}")

    def drop(self, why: str) -> None:
        """Close this connection (a call found it broken); the next use opens another."""
        runner = self._runner
        if runner is not None and runner.task is not None and not runner.task.done():
            log.info("MCP server %s: dropping its connection (%s)", self.server.name, why)
            runner.stop.set()
            runner.client = None

    async def open_client(self, wait: float) -> Client:
        """The open client, connecting first if there is none: for at most `wait` seconds
        from the start of the attempt (which an earlier caller may have begun)."""
        client = self.client
        if client is not None:
            return client
        self.start()
        runner = self._runner
        assert runner is not None
        # Counted from when this connection attempt began: a server that never answers
        # costs each caller at most what is left of one wait, not a wait each.
        left = runner.started_at + wait - time.monotonic()
        try:
            async with asyncio.timeout(max(left, 0)):
                await runner.ready.wait()
        except TimeoutError:
            raise McpUnavailable(
                f"MCP server {self.server.name!r} did not connect within {wait:g} s"
            ) from None
        if runner.client is None:
            raise McpUnavailable(
                f"MCP server {self.server.name!r} is unreachable: {self.error or 'not connected'}"
            )
        return runner.client

    async def _run(self, runner: _Runner) -> None:
        import mcp_types
        from mcp import Client

        name = self.server.name
        try:
            async with (
                contextlib.AsyncExitStack() as stack,
                Client(
                    await self._target(stack),
                    message_handler=self._on_message,
                    mode=self.server.protocol,
                    read_timeout_seconds=self.server.connect_timeout_seconds,
                    client_info=mcp_types.Implementation(name="think", version="1"),
                ) as client,
                # Its own stack, left before the client is: the subscription's request
                # ends while the session can still say so.
                contextlib.AsyncExitStack() as inner,
            ):
                # Subscribed before the first listing: no change can fall in between.
                subscription = await _subscribe(inner, client)
                self.tools = await _list_tools(client, name)
                self.listed_at, self.stale = time.monotonic(), False
                runner.client, self.error = client, None
                runner.ready.set()
                log.info("MCP server %s: connected, %d tools", name, len(self.tools))
                try:
                    await self._watch(runner, subscription)
                finally:
                    # Gone before the transports are closed, which may take a while (a
                    # child's exit is waited for): no call may borrow a dead client meanwhile.
                    runner.client = None
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise  # the pool is closing
            self.error = "the connection was cancelled"
        except BaseException as exc:
            self.error = _describe(exc)
            log.warning("MCP server %s: connection ended: %s", name, self.error)
        finally:
            runner.client = None
            self.failed_at = time.monotonic()
            runner.ready.set()

    async def _watch(self, runner: _Runner, subscription: Any) -> None:
        """Until the connection is dropped: follow the server's tool-list changes. On a
        2026-07-28 connection they come through the subscription, whose loss means the
        server is gone; on an older one, as notifications (`_on_message`)."""
        waits: set[asyncio.Task[Any]] = {asyncio.create_task(runner.stop.wait())}
        if subscription is not None:
            waits.add(asyncio.create_task(self._follow(subscription)))
        try:
            done, _ = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                task.result()  # the subscription's loss ends the connection
        finally:
            for task in waits:
                task.cancel()
            await asyncio.gather(*waits, return_exceptions=True)

    async def _follow(self, subscription: Any) -> None:
        async for _event in subscription:
            self.stale = True
            log.info("MCP server %s: its tools changed", self.server.name)

    async def _on_message(self, message: Any) -> None:
        import mcp_types

        if isinstance(message, mcp_types.ToolListChangedNotification) or (
            getattr(message, "method", None) == "notifications/tools/list_changed"
        ):
            self.stale = True

    async def _target(self, stack: contextlib.AsyncExitStack) -> StdioServerParameters | Any:
        from mcp import StdioServerParameters
        from mcp.client.streamable_http import streamable_http_client

        server = self.server
        if server.transport == "stdio":
            assert server.command is not None
            return StdioServerParameters(
                command=server.command,
                args=list(server.args),
                env=server.resolved_env(),
                cwd=server.cwd,
            )
        assert server.url is not None
        http = await stack.enter_async_context(
            httpx2.AsyncClient(
                headers=server.resolved_headers(),
                # No read timeout: the change subscription is a stream that may stay quiet
                # for hours; each call is bounded by `timeout_seconds` instead.
                timeout=httpx2.Timeout(server.connect_timeout_seconds, read=None),
            )
        )
        return streamable_http_client(server.url, http_client=http)

    def needs_listing(self) -> bool:
        return self.stale or time.monotonic() - self.listed_at > self.server.refresh_seconds

    async def refresh(self, client: Client) -> None:
        self.stale = False  # a change announced while we list is caught by the next one
        try:
            self.tools = await _list_tools(client, self.server.name)
        except BaseException:
            self.stale = True
            raise
        self.listed_at = time.monotonic()

    def refresh_later(self) -> None:
        if self.client is None or (self._refreshing is not None and not self._refreshing.done()):
            return
        self._refreshing = asyncio.create_task(self._refresh_quietly(self.client))

    async def _refresh_quietly(self, client: Client) -> None:
        try:
            async with asyncio.timeout(self.server.connect_timeout_seconds):
                await self.refresh(client)
        except Exception as exc:
            log.warning("MCP server %s: listing its tools failed: %s", self.server.name, exc)

    async def close(self) -> None:
        self.drop("the pool is closing")
        tasks = [*self._closing]
        if self._runner is not None and self._runner.task is not None:
            tasks.append(self._runner.task)
        for task in tasks:
            with contextlib.suppress(Exception, asyncio.CancelledError, TimeoutError):
                async with asyncio.timeout(5):
                    await asyncio.shield(task)
            if not task.done():
                task.cancel()


def _closed(client: Client) -> bool:
    """Whether the session's dispatcher has seen its transport end: its read loop stopped at
    an EOF, and every request would fail unsent with `CONNECTION_CLOSED`. The SDK exposes
    no public flag for it; read defensively (False when its insides change), in which case
    a call on the dead connection fails once as a tool error and the next one reconnects."""
    dispatcher = getattr(getattr(client, "_session", None), "_dispatcher", None)
    return getattr(dispatcher, "_closed", False) is True


async def _subscribe(stack: contextlib.AsyncExitStack, client: Client) -> Any:
    """A `subscriptions/listen` stream of tool-list changes, or None on an older protocol."""
    from mcp.client.subscriptions import ListenNotSupportedError

    try:
        return await stack.enter_async_context(client.listen(tools_list_changed=True))
    except ListenNotSupportedError:
        return None


async def _list_tools(client: Client, server: str) -> list[McpToolInfo]:
    tools: list[McpToolInfo] = []
    cursor: str | None = None
    for _ in range(_MAX_PAGES):
        page = await client.list_tools(cursor=cursor, cache_mode="refresh")
        tools.extend(
            McpToolInfo(
                server=server,
                name=t.name,
                description=t.description or "",
                input_schema=dict(t.input_schema or {"type": "object"}),
            )
            for t in page.tools
        )
        cursor = page.next_cursor
        if cursor is None:
            break
    return tools


def tool_output(server: str, tool: str, result: CallToolResult) -> Any:
    """A call's result as the model reads it: the structured content when there is some,
    else the text, else the content blocks; an error result becomes a `ToolError`. A server
    may answer anything JSON can say, NUL and lone surrogates included: they are replaced
    here (`think._messages.storable`), so what the model reads is what is stored."""
    from mcp_types import TextContent

    texts = [storable_text(c.text) for c in result.content if isinstance(c, TextContent)]
    if result.is_error:
        raise ToolError("\n".join(texts) or f"tool {tool!r} of MCP server {server!r} failed")
    if result.structured_content is not None:
        return storable(result.structured_content)
    if len(texts) == len(result.content):
        return "\n".join(texts)
    return storable(
        [c.model_dump(mode="json", by_alias=True, exclude_none=True) for c in result.content]
    )


class McpPool:
    """The connections of one event loop (a worker's, or the gateway's)."""

    def __init__(self) -> None:
        self._connections: dict[str, _Connection] = {}

    def connection(self, server: McpServer) -> _Connection:
        now = time.monotonic()
        for idle in self._connections.values():
            if idle.alive and now - idle.used_at > IDLE_SECONDS:
                idle.drop(f"unused for {IDLE_SECONDS:g} s")
        key = server.model_dump_json()
        conn = self._connections.get(key)
        if conn is None:
            conn = self._connections[key] = _Connection(server)
        conn.used_at = now
        return conn

    async def tools(
        self, server: McpServer, *, wait: bool, within: float | None = None
    ) -> list[McpToolInfo] | None:
        """The server's tools. `wait`: connect (or list again) first, for at most its
        `connect_timeout_seconds` (or `within`, when that is shorter). Without it, what is
        known now, connecting or listing in the background for next time; None when the
        server was never reached."""
        conn = self.connection(server)
        if not wait:
            if not conn.alive and time.monotonic() - conn.failed_at > _RECONNECT_PAUSE_SECONDS:
                conn.start()
            elif conn.alive and conn.needs_listing():
                conn.refresh_later()
            return conn.tools
        bound = (
            server.connect_timeout_seconds
            if within is None
            else min(within, server.connect_timeout_seconds)
        )
        from mcp import MCPError

        try:
            client = await conn.open_client(bound)
            if conn.needs_listing():
                async with asyncio.timeout(bound):
                    await conn.refresh(client)
        except (McpUnavailable, TimeoutError, MCPError, OSError) as exc:
            log.warning("MCP server %s: no fresh tool list: %s", server.name, _describe(exc))
        return conn.tools

    async def call(self, server: McpServer, tool: str, arguments: dict[str, Any]) -> Any:
        """Call `tool`; `McpUnavailable` when the server cannot be reached (the call was never
        sent), `ToolError` for everything else that goes wrong."""
        from mcp import MCPError
        from mcp_types import CONNECTION_CLOSED

        conn = self.connection(server)
        client = await conn.open_client(server.connect_timeout_seconds)
        try:
            async with asyncio.timeout(server.timeout_seconds):
                result = await client.call_tool(
                    tool, arguments, read_timeout_seconds=server.timeout_seconds
                )
        except TimeoutError:
            raise ToolError(
                f"tool {tool!r} of MCP server {server.name!r} did not answer within "
                f"{server.timeout_seconds:g} s"
            ) from None
        except MCPError as exc:
            if exc.code == CONNECTION_CLOSED:
                # Not retried: the server may have done the work before it went.
                conn.drop(str(exc))
                raise ToolError(
                    f"MCP server {server.name!r} went away during the call of {tool!r}"
                ) from None
            raise ToolError(f"MCP server {server.name!r} refused {tool!r}: {exc}") from None
        except ToolError:
            raise
        except Exception as exc:
            if isinstance(exc, _TRANSPORT_ERRORS):
                conn.drop(_describe(exc))  # the next use connects again
            # Else the connection is fine and the answer was not (say structured content
            # that does not match the tool's output schema, which the SDK checks).
            raise ToolError(
                f"MCP server {server.name!r} failed the call of {tool!r}: {_describe(exc)}"
            ) from None
        return tool_output(server.name, tool, result)

    async def close(self) -> None:
        connections, self._connections = list(self._connections.values()), {}
        await asyncio.gather(*(c.close() for c in connections), return_exceptions=True)


_pools: dict[asyncio.AbstractEventLoop, McpPool] = {}


def pool() -> McpPool:
    """This event loop's pool (a worker has one loop; a closed loop's pool is forgotten)."""
    loop = asyncio.get_running_loop()
    for other in [lp for lp in _pools if lp.is_closed()]:
        del _pools[other]
    found = _pools.get(loop)
    if found is None:
        found = _pools[loop] = McpPool()
    return found


async def close_pool() -> None:
    """Close this loop's connections (stdio servers exit): a worker calls it as it stops."""
    found = _pools.pop(asyncio.get_running_loop(), None)
    if found is not None:
        await found.close()
