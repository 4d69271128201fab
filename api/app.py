"""The FastAPI gateway: `create_app(settings)` and nothing at import time.

The lifespan opens the process's resources once (the database pool, the Temporal client, the
LISTEN connection) and routes receive them through dependencies; nothing is global.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import Depends, FastAPI
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api import _docs, errors
from api._listener import ChunkListener
from api.deps import Resources, require_tenant
from api.routes import agents, conversations, health, schedules, search, tree, turns
from think.server import AgentRegistry, Settings, connect
from think.storage import Store, open_database
from think.tools import close_mcp_pool


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


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or Settings.from_env()
    registry = AgentRegistry.from_paths(settings.agents)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        db = await open_database(settings, max_size=20)
        listener = ChunkListener(settings.libpq_url)
        await listener.start()
        temporal = await connect(settings)
        app.state.resources = Resources(
            settings=settings,
            store=Store(db),
            temporal=temporal,
            listener=listener,
            registry=registry,
        )
        try:
            yield
        finally:
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
    _docs.install(app)
    # Every /v1 route needs the caller's tenant, which answers 401 first when keys are
    # configured; the operations routes stay open for load balancers and probes.
    for module in (agents, conversations, schedules, search, tree, turns):
        app.include_router(module.router, dependencies=[Depends(require_tenant)])
    app.include_router(health.router)
    app.add_middleware(BodyLimit, limit=settings.max_body_bytes)
    return app
