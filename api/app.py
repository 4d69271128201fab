"""The FastAPI gateway: `create_app(settings)` and nothing at import time.

The lifespan opens the process's resources once (the database pool, the Temporal client, the
LISTEN connection) and routes receive them through dependencies; nothing is global.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import Depends, FastAPI
from fastapi.middleware.cors import CORSMiddleware
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api import _docs, _openapi, _ui, a2a, errors
from api._limits import TenantLimits
from api._startup import OneLineStartupErrors
from api._unique_keys import UniqueKeys
from api.deps import Resources, require_tenant
from api.mcp import MCP_HEADERS, McpServer
from api.routes import (
    actions,
    agents,
    chat,
    conversations,
    data,
    health,
    messengers,
    problems,
    schedules,
    search,
    tree,
    turns,
    usage,
    workspace,
)
from think.server import (
    AgentRegistry,
    ChunkListener,
    DailyBudgets,
    MessengerHub,
    Settings,
    Store,
    close_mcp_pool,
    connect,
    metrics,
    open_database,
)


class BodyLimit:
    """Answer 413 for bodies over the limit, whether or not Content-Length is declared."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for name, value in scope.get("headers", []):
            if name == b"content-length" and value.isdigit() and int(value) > self.limit:
                await self._too_large(scope, receive, send)
                return
        seen = 0

        async def limited() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.limit:
                    raise _TooLarge(self.limit)
            return message

        try:
            await self.app(scope, limited, send)
        except _TooLarge:
            await self._too_large(scope, receive, send)

    async def _too_large(self, scope: Scope, receive: Receive, send: Send) -> None:
        response = errors.problem_response(413, _TooLarge(self.limit).detail)
        await response(scope, receive, send)


class _TooLarge(StarletteHTTPException):
    """An HTTPException, because FastAPI turns any other error met while reading the body into
    400 "error parsing the body"; this one it re-raises, and the app's handler answers 413."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, f"the request body is larger than the limit of {limit} bytes")


class HttpMetrics:
    """Count every answer by method, route template and status (`think_http_requests_total`),
    and time it to its headers. The template (`/v1/agents/{agent}/...`), never the path: a
    path holds conversation ids, which would make the label set unbounded."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()

        async def timed(message: Message) -> None:
            if message["type"] == "http.response.start":
                route = scope.get("route")
                template = getattr(route, "path", None) or "unmatched"
                method = scope["method"]
                status = str(message["status"])
                metrics.HTTP_REQUESTS.labels(method, template, status).inc()
                metrics.HTTP_DURATION.labels(method, template).observe(
                    time.perf_counter() - started
                )
            await send(message)

        await self.app(scope, receive, timed)


class HeadAsGet:
    """HEAD on every GET route (RFC 9110 9.3.2): the GET's status and headers, no body.

    FastAPI registers a GET route for GET alone, so HEAD was a 405. The app runs the GET; its
    body is dropped here, and once the headers are out the request reads as disconnected, so
    a stream (`.../stream`) stops at once instead of following a running turn."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "HEAD":
            await self.app(scope, receive, send)
            return
        done = False

        async def headless(message: Message) -> None:
            nonlocal done
            if done:
                return
            if message["type"] == "http.response.body":
                done = True
                message = {"type": "http.response.body", "body": b"", "more_body": False}
            await send(message)

        async def gone() -> Message:
            if done:
                return {"type": "http.disconnect"}
            return await receive()

        # A copy: the server keeps its own scope, and answers a HEAD without a body itself.
        await self.app({**scope, "method": "GET"}, gone, headless)


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or Settings.from_env()
    registry = AgentRegistry.from_paths(settings.agents)
    mcp = McpServer(max_body_bytes=settings.max_body_bytes)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        db = await open_database(settings, max_size=settings.db_pool_size)
        listener = ChunkListener(settings.libpq_url)
        await listener.start()
        temporal = await connect(settings)
        metrics.count_events()
        store = Store(db)
        limits = TenantLimits(
            store=store,
            per_minute=settings.submission_rate,
            burst=settings.submission_burst,
            max_streams=settings.max_streams_per_tenant,
        )
        renewing = asyncio.create_task(limits.renew_forever())
        app.state.resources = Resources(
            settings=settings,
            store=store,
            temporal=temporal,
            listener=listener,
            registry=registry,
            limits=limits,
            budgets=DailyBudgets.of(settings),
        )
        app.state.messengers = MessengerHub(store, temporal, settings, registry)
        try:
            # The MCP session manager's task group lives as long as the app (api/mcp).
            async with mcp.run():
                yield
        finally:
            await app.state.messengers.close()
            renewing.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await renewing
            await close_mcp_pool()  # the MCP servers `GET /v1/agents` connected to
            await listener.stop()
            await db.close()

    app = FastAPI(
        title="Think",
        version="1",
        summary="Durable chat agents: submit turns, stream replies, inspect conversations.",
        lifespan=lifespan,
        docs_url=None,  # served from the package instead of a CDN: api/_docs.py
        redoc_url=None,
    )
    errors.install(app)
    _openapi.install(app)
    _docs.install(app)
    _ui.install(app, settings)
    # Every /v1 route needs the caller's tenant, which answers 401 first when keys are
    # configured; the operations routes stay open for load balancers and probes.
    routers = (
        actions,
        agents,
        chat,
        conversations,
        data,
        schedules,
        search,
        tree,
        turns,
        usage,
        workspace,
    )
    for module in routers:
        app.include_router(module.router, dependencies=[Depends(require_tenant)])
    app.include_router(health.router)
    # A chat platform's webhook carries its own verification, not our API keys.
    app.include_router(messengers.router)
    # A2A (api/a2a/): its JSON-RPC endpoint checks the bearer key itself, as `/v1` does; the
    # agent cards are public, as A2A discovery expects (they say which scheme to use).
    a2a.install(app)
    app.include_router(problems.router)
    # The MCP server (an ASGI app: the SDK's transport), authenticated by itself as /v1 is.
    app.router.routes.append(Route("/mcp", mcp, methods=["GET", "POST", "DELETE"]))
    # Innermost, inside the body limit: it reads the body through it.
    app.add_middleware(UniqueKeys)
    app.add_middleware(BodyLimit, limit=settings.max_body_bytes)
    # Inside HeadAsGet, which hands the app a copy of the scope: the route is set on that one.
    app.add_middleware(HttpMetrics)
    app.add_middleware(HeadAsGet)
    # A startup that fails on an error of ours is logged in one line, not a traceback.
    app.add_middleware(OneLineStartupErrors)
    if settings.cors_origins:
        # Outermost: a preflight is answered before anything else sees it, and every answer
        # (a 401 or a 429 too) carries the headers a browser needs to read it.
        app.add_middleware(
            CORSMiddleware,
            allow_origins=settings.cors_origins,
            allow_methods=["GET", "POST", "PUT", "DELETE"],
            allow_headers=[
                "Authorization",
                "Content-Type",
                "Idempotency-Key",
                "Last-Event-ID",
                *MCP_HEADERS,
            ],
            expose_headers=["x-think-turn-id", "Retry-After", "Mcp-Session-Id"],
            max_age=600,
        )
    return app
