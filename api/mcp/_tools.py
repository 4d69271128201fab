"""`tools/list` and `tools/call`: each hosted agent is a tool named as the agent, and a call
is a turn admitted through the one front door (`think.server.admit_submission`), with the
same budgets and limits as `POST .../turns`.

A call waits for the turn to settle (`wait_for_answer`), sending `notifications/progress`
from the turn's stream (`follow`) when the client gave a progress token. A turn that pauses
for approval asks the client: on 2026-07-28 with an `InputRequiredResult` (the retry carries
the answers and the turn in `requestState`, so it resumes the same turn, never admits
another); on a 2025 session with `elicitation/create` on the call's own stream. A client
that declares the Tasks extension on the call gets the turn as a task (`_tasks`).
"""

from __future__ import annotations

import hashlib
import json
import logging
from typing import Any

import anyio
from mcp.server.context import HandlerResult, ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    CallToolRequestParams,
    CallToolResult,
    ClientCapabilities,
    ElicitationCapability,
    ElicitResult,
    InputRequiredResult,
    ListToolsResult,
    PaginatedRequestParams,
    TextContent,
    Tool,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from api._budgets import check_budgets
from api.errors import Problem
from api.mcp import _tasks
from api.mcp._turns import (
    Caller,
    approval_requests,
    caller_of,
    decide,
    task_turn,
    tool_result,
)
from api.schemas import ID_PATTERN
from think.server import (
    TERMINAL_STATUSES,
    DispatchFailed,
    Think,
    TurnRecord,
    UIMessage,
    admit_submission,
    follow,
    new_id,
    turn_view,
    wait_for_answer,
)

log = logging.getLogger("think.api.mcp")

INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "message": {"type": "string", "minLength": 1, "description": "What to say to the agent"},
        "conversation_id": {
            "type": "string",
            "pattern": ID_PATTERN,
            "description": "Continue this conversation (a tool result's "
            "`_meta['io.think/conversation_id']`); a new one when absent",
        },
    },
    "required": ["message"],
    "additionalProperties": False,
}
ASKS = ClientCapabilities(elicitation=ElicitationCapability())
"""What a client must declare to be asked for approvals (any elicitation mode: form, here)."""
PROGRESS_CATCH_UP = 2.0
"""Seconds a call's result waits for the progress notifications of its ended turn."""
WAIT_SECONDS = 600.0
"""How long one `tools/call` waits for its turn (HTTP's wait mode bound); a longer turn is a
task for a client that declares the Tasks extension."""


class ToolArguments(BaseModel):
    """A tool call's arguments (`INPUT_SCHEMA`)."""

    model_config = ConfigDict(extra="forbid")

    message: str = Field(min_length=1)
    conversation_id: str | None = Field(default=None, pattern=ID_PATTERN)

    @field_validator("message")
    @classmethod
    def _storable(cls, message: str) -> str:
        """Words Postgres can store, as `POST .../turns` requires of its input: no NUL, no
        unpaired surrogate (which JSON can spell, as `\\ud800`), and not only blanks."""
        if not message.strip():
            raise ValueError("must not be blank")
        if "\x00" in message:
            raise ValueError("must not contain NUL characters")
        try:
            message.encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError("must not contain unpaired surrogates") from None
        return message


class TurnState(BaseModel):
    """`requestState` of an `InputRequiredResult`: the turn the retry resumes. Not trusted:
    the retry looks the turn up within the caller's tenant again."""

    turn: str


def description(agent: type[Think]) -> str:
    """The agent's description as `GET /v1/agents` shows it."""
    return agent.description or (agent.__doc__ or "").strip().split("\n")[0]


async def list_tools(
    ctx: ServerRequestContext[Any, Any], params: PaginatedRequestParams
) -> ListToolsResult:
    caller = caller_of(ctx)
    tools = [
        Tool(name=agent.name, description=description(agent), input_schema=INPUT_SCHEMA)
        for agent in caller.res.registry
    ]
    return ListToolsResult(tools=tools)


async def call_tool(
    ctx: ServerRequestContext[Any, Any], params: CallToolRequestParams
) -> HandlerResult:
    caller = caller_of(ctx)
    if params.name not in caller.res.registry:
        raise MCPError(code=INVALID_PARAMS, message=f"Unknown tool: {params.name!r}")
    agent = caller.res.registry.get(params.name)
    if params.request_state is not None:
        return await _resume(ctx, caller, agent, params)
    try:
        arguments = ToolArguments.model_validate(params.arguments or {})
    except ValidationError as invalid:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg']}"
            for e in invalid.errors()
        )
        return CallToolResult(
            content=[TextContent(text=f"invalid arguments: {problems}")], is_error=True
        )
    turn, runs_now = await _admit(ctx, caller, agent, arguments)
    if _tasks.requested(ctx):
        return _tasks.created(turn)
    return await _answer(ctx, caller, turn, queued=not runs_now)


async def _admit(
    ctx: ServerRequestContext[Any, Any],
    caller: Caller,
    agent: type[Think],
    arguments: ToolArguments,
) -> tuple[TurnRecord, bool]:
    """Admit the call's turn as `POST .../turns` would (budgets, the submission rate, one
    front door). The idempotency key: the request's `Idempotency-Key` header when it has one,
    else, on a 2025 session, the session id and the JSON-RPC request id (a resent request is
    the same turn); a new conversation's id derives from the key, so a retry lands in it."""
    res, tenant = caller.res, caller.tenant
    key = _idempotency_key(ctx)
    cid = arguments.conversation_id
    if cid is None:
        cid = _new_conversation_id(tenant, agent.name, key)
    elif (
        await res.store.get_conversation(tenant=tenant, agent=agent.name, conversation_id=cid)
        is None
    ):
        # Another tenant's conversation answers exactly as one that does not exist.
        raise MCPError(
            code=INVALID_PARAMS,
            message=f"conversation {cid!r} does not exist for agent {agent.name!r}",
        )
    try:
        await check_budgets(res.budgets, res.store, tenant)
        await res.limits.take_submission(tenant)
        admission = await admit_submission(
            res.store,
            res.temporal,
            res.settings.task_queue,
            agent,
            tenant=tenant,
            conversation_id=cid,
            messages=[UIMessage.user_text(arguments.message)],
            input=arguments.message,
            idempotency_key=key,
            submitted_by=caller.principal.key_name,
        )
    except Problem as refused:  # a budget, the rate, a conflicting key: the client's to fix
        raise MCPError(code=INVALID_REQUEST, message=refused.detail) from None
    except DispatchFailed as exc:
        raise MCPError(
            code=INVALID_REQUEST, message=f"{exc}; the turn is recorded: call again to resume"
        ) from None
    return admission.turn, admission.runs_now


def _idempotency_key(ctx: ServerRequestContext[Any, Any]) -> str | None:
    request = ctx.request
    headers = getattr(request, "headers", None)
    given = headers.get("idempotency-key") if headers is not None else None
    if given and len(given) <= 255 and all(" " <= c <= "~" for c in given):
        return str(given)
    session = headers.get("mcp-session-id") if headers is not None else None
    if session and ctx.request_id is not None:
        return f"mcp:{session}:{ctx.request_id}"
    return None


def _new_conversation_id(tenant: str, agent: str, key: str | None) -> str:
    if key is None:
        return new_id("mcp")
    digest = hashlib.sha256(json.dumps([tenant, agent, key]).encode()).hexdigest()
    return f"mcp_{digest[:24]}"


async def _resume(
    ctx: ServerRequestContext[Any, Any],
    caller: Caller,
    agent: type[Think],
    params: CallToolRequestParams,
) -> HandlerResult:
    """The retry of a call that asked for input: record the answers, then wait on."""
    try:
        state = TurnState.model_validate_json(params.request_state or "")
    except ValidationError:
        raise MCPError(code=INVALID_PARAMS, message="Invalid or expired requestState") from None
    turn = await task_turn(caller, state.turn)
    if turn.agent != agent.name:
        raise MCPError(code=INVALID_PARAMS, message="Invalid or expired requestState")
    answers = {
        key: value
        for key, value in (params.input_responses or {}).items()
        if isinstance(value, ElicitResult)
    }
    await decide(caller, turn, answers)
    return await _answer(ctx, caller, turn, queued=False)


async def _answer(
    ctx: ServerRequestContext[Any, Any], caller: Caller, turn: TurnRecord, *, queued: bool
) -> HandlerResult:
    """Wait for the turn to settle and answer for it; while it waits for approvals, ask."""
    while True:
        turn = await _settled(ctx, caller, turn, queued=queued)
        queued = False
        asked = approval_requests(turn)
        if turn.status in TERMINAL_STATUSES or not asked:
            if turn.status not in TERMINAL_STATUSES:
                return _still_running(turn)
            return tool_result(turn)
        if not ctx.session.check_client_capability(ASKS):
            return _still_running(turn)  # a client that cannot show a form cannot be asked
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            return InputRequiredResult(
                input_requests=dict(asked),
                request_state=TurnState(turn=turn.id).model_dump_json(),
            )
        if not ctx.session.can_send_request:
            return _still_running(turn)
        answers = {}
        for approval_id, request in asked.items():
            params = request.params
            answers[approval_id] = await ctx.session.elicit_form(
                params.message,
                params.requested_schema,  # type: ignore[union-attr]  # form params, built above
                related_request_id=ctx.request_id,
            )
        await decide(caller, turn, answers)


async def _settled(
    ctx: ServerRequestContext[Any, Any], caller: Caller, turn: TurnRecord, *, queued: bool
) -> TurnRecord:
    """The turn once terminal or paused (or after `WAIT_SECONDS`), with progress from its
    stream meanwhile when the client asked for it."""
    res = caller.res
    token = _progress_token(ctx)
    followed = anyio.Event()
    async with anyio.create_task_group() as group:
        if token is not None:
            group.start_soon(_progress, ctx, caller, turn, token, followed)
        waited = await wait_for_answer(
            res.store, res.listener, turn.id, WAIT_SECONDS, queued=queued
        )
        if token is not None and waited.turn.status in TERMINAL_STATUSES:
            # The stream of an ended turn ends too: let the notifications catch up with the
            # result, so the client has them all before it (bounded, should a chunk be late).
            with anyio.move_on_after(PROGRESS_CATCH_UP):
                await followed.wait()
        group.cancel_scope.cancel()
    return waited.turn


def _progress_token(ctx: ServerRequestContext[Any, Any]) -> str | int | None:
    """The request's `_meta.progressToken`, if it asked for progress."""
    meta = (ctx.params or {}).get("_meta")
    token = meta.get("progressToken") if isinstance(meta, dict) else None
    return token if isinstance(token, str | int) and not isinstance(token, bool) else None


async def _progress(
    ctx: ServerRequestContext[Any, Any],
    caller: Caller,
    turn: TurnRecord,
    token: str | int,
    followed: anyio.Event,
) -> None:
    """`notifications/progress` from the turn's stream: one per step and tool call, with the
    answer so far in characters as the progress (no total: a turn's length is unknown)."""
    try:
        await _notify_progress(ctx, caller, turn, token)
    finally:
        followed.set()


async def _notify_progress(
    ctx: ServerRequestContext[Any, Any], caller: Caller, turn: TurnRecord, token: str | int
) -> None:
    written = 0
    async for _, chunk in follow(caller.res.store, caller.res.listener, turn.id):
        kind = chunk["type"]
        message: str | None = None
        if kind == "text-delta":
            delta = chunk.get("delta")
            written += len(delta) if isinstance(delta, str) else 0
            continue
        if kind == "start-step":
            message = "thinking"
        elif kind == "tool-input-available":
            message = f"calling {chunk.get('toolName', 'a tool')}"
        elif kind == "tool-approval-request":
            message = "waiting for approval"
        elif kind == "finish-step":
            message = "step done"
        if message is not None:
            await ctx.session.send_progress_notification(
                token, float(written), message=message, related_request_id=str(ctx.request_id)
            )


def _still_running(turn: TurnRecord) -> CallToolResult:
    """A turn the call could not wait out (or whose approvals this client cannot be asked):
    a tool error saying where it stands, with its ids to follow it elsewhere."""
    view = turn_view(turn)
    waiting = ", ".join(p.approval_id for p in view.pending_approvals)
    why = f"it waits for approvals ({waiting})" if waiting else "it is still running"
    result = tool_result(turn)
    result.content = [TextContent(text=f"the turn has not ended: {why}")]
    result.is_error = True
    return result
