"""The A2A routes: each agent's JSON-RPC endpoint, `POST /a2a/{agent}`, and its agent card,
`GET /a2a/{agent}/.well-known/agent-card.json` (also `GET /.well-known/agent-card.json?agent=`).

The SDK's `JsonRpcDispatcher` parses, validates and answers JSON-RPC (v1.0 method names, and
v0.3's `message/send`, `tasks/get`, ... through its compatibility adapter) and streams SSE;
this module only says who is calling which agent before handing it the request. The bearer
key is checked as on `/v1` (`require_principal`: 401 without a valid one); an unknown agent
is a JSON-RPC error (with 404) rather than a problem document, since the endpoint speaks
JSON-RPC.
"""

from __future__ import annotations

from typing import Annotated

from a2a.server.context import ServerCallContext
from a2a.server.request_handlers.response_helpers import build_error_response
from a2a.server.routes import DefaultServerCallContextBuilder
from a2a.server.routes.jsonrpc_dispatcher import JsonRpcDispatcher
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    HTTPAuthSecurityScheme,
    SecurityRequirement,
    SecurityScheme,
    StringList,
)
from a2a.utils.constants import PROTOCOL_VERSION_CURRENT
from a2a.utils.errors import InvalidRequestError
from fastapi import FastAPI, Query, Request
from fastapi.responses import JSONResponse, Response
from google.protobuf.json_format import MessageToDict
from starlette.requests import Request as StarletteRequest
from starlette.types import Receive, Scope, Send

from api.a2a._handler import CALL, Call, TurnsHandler
from api.deps import Caller, Res
from think.server import Think, metrics

CARD = "/.well-known/agent-card.json"
BEARER = "bearer"
"""The card's name for the security scheme: a bearer key, as on `/v1`."""


class _CallContext(DefaultServerCallContextBuilder):
    """The SDK's call context (headers, for its protocol-version check), with our `Call`."""

    def build(self, request: StarletteRequest) -> ServerCallContext:
        context = super().build(request)
        context.state[CALL] = request.scope[CALL]
        return context


def describe(agent: type[Think]) -> str:
    """An agent's description: its own, else its docstring's first line (as `/v1/agents`)."""
    return agent.description or (agent.__doc__ or "").strip().split("\n")[0]


def agent_card(agent: type[Think], base: str, *, keys: bool) -> AgentCard:
    """The agent's card: its endpoint on this gateway (JSON-RPC, A2A 1.0), streaming, one
    skill (talking to the agent), and the bearer scheme (required when keys are set)."""
    description = describe(agent) or f"The {agent.name} agent"
    card = AgentCard(
        name=agent.name,
        description=description,
        version="1",
        supported_interfaces=[
            AgentInterface(
                url=f"{base}/a2a/{agent.name}",
                protocol_binding="JSONRPC",
                protocol_version=PROTOCOL_VERSION_CURRENT,
            )
        ],
        capabilities=AgentCapabilities(streaming=True, push_notifications=False),
        default_input_modes=["text/plain", "application/json"],
        default_output_modes=["text/plain"],
        skills=[
            AgentSkill(
                id=agent.name,
                name=agent.name,
                description=description,
                tags=["chat"],
                input_modes=["text/plain", "application/json"],
                output_modes=["text/plain"],
            )
        ],
        security_schemes={
            BEARER: SecurityScheme(
                http_auth_security_scheme=HTTPAuthSecurityScheme(
                    scheme="Bearer", description="A Think API key (THINK_API_KEYS)"
                )
            )
        },
    )
    if keys:
        card.security_requirements.append(SecurityRequirement(schemes={BEARER: StringList()}))
    return card


def install(app: FastAPI) -> None:
    """Add the A2A routes to the app, with their own dispatcher (one per app: nothing at
    import time). Outside the OpenAPI document: the protocol's own documents describe them
    (the agent card, A2A's specification), and docs/api.md lists them."""
    dispatcher = JsonRpcDispatcher(
        request_handler=TurnsHandler(), context_builder=_CallContext(), enable_v0_3_compat=True
    )

    def card_response(res: Res, request: Request, name: str) -> JSONResponse:
        agent = res.registry.get(name)  # AgentNotFoundError: 404, as on /v1
        # THINK_PUBLIC_URL when set (what a deployment behind a proxy must set), else the
        # address this request came to.
        base = res.settings.public_url or str(request.base_url).rstrip("/")
        card = agent_card(agent, base, keys=bool(res.settings.api_keys))
        return JSONResponse(MessageToDict(card), headers={"cache-control": "no-store"})

    @app.get(f"/a2a/{{agent}}{CARD}", include_in_schema=False)
    async def agent_card_of(res: Res, request: Request, agent: str) -> JSONResponse:
        return card_response(res, request, agent)

    @app.get(CARD, include_in_schema=False)
    async def well_known_card(
        res: Res,
        request: Request,
        agent: Annotated[str, Query(description="The agent's name")],
    ) -> JSONResponse:
        return card_response(res, request, agent)

    @app.post("/a2a/{agent}", include_in_schema=False)
    async def endpoint(res: Res, caller: Caller, request: Request, agent: str) -> Response:
        if agent not in res.registry:
            error = InvalidRequestError(message=f"no agent named {agent!r} here")
            return JSONResponse(build_error_response(None, error), status_code=404)
        call = Call(res=res, principal=caller, agent=res.registry.get(agent))
        request.scope[CALL] = call
        try:
            response = await dispatcher.handle_requests(request)
        except BaseException:
            await _give_back(call)
            raise
        if not call.streams:
            return response
        return _Streaming(response, call)


async def _give_back(call: Call) -> None:
    for release in call.streams:
        await release()
    call.streams.clear()


class _Streaming(Response):
    """A stream's response, which gives its stream slot back when it ends, however it ends
    (done, client gone, server stopping): the ASGI call returns in every case, where the
    handler's generator might never run its `finally` (as `api._sse`'s streams do)."""

    def __init__(self, inner: Response, call: Call) -> None:
        self.inner = inner
        self.call = call
        self.background = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        metrics.STREAMS_OPEN.inc()
        try:
            await self.inner(scope, receive, send)
        finally:
            metrics.STREAMS_OPEN.dec()
            await _give_back(self.call)
