"""The AI SDK's chat transports: a stock `useChat` (its `DefaultChatTransport`, or
`WorkflowChatTransport` from `@ai-sdk/workflow`) talks to an agent with no shim.

`POST /v1/agents/{agent}/chat` takes the transport's body and answers the UI message stream
of the turn it admits (a submission, a regenerate) or goes on with (after approvals), through
the same front door as the turn routes. `GET /v1/agents/{agent}/chat/{id}/stream` resumes:
`id` is the conversation (the default transport's reconnect: its active turn, 204 when none)
or a turn (the workflow transport's: by the `x-workflow-run-id` the POST answered).
`api/_chat.py` holds the body and the transcript check; docs/protocols.md says how to use it.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Request, Response
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute

from api import _answers, _chat, _turns
from api.deps import AgentClass, Caller, Principal, Res, Tenant
from api.errors import Problem
from api.schemas import ID_PATTERN, RegenerateBody, SubmitTurnBody
from think.server import (
    PAUSED_STATUSES,
    Conversation,
    Think,
    ToolDecision,
    ToolResultSubmission,
    TurnRecord,
    approval_decided,
    approval_request,
    asked_at,
    client_tool_call,
    stream_tail,
    tenant_turn,
    tool_call_answered,
)


class _StringBodies(APIRoute):
    """Reads a `text/plain` body as JSON. `WorkflowChatTransport` posts `JSON.stringify(...)`
    with no headers, and `fetch` labels a string body `text/plain;charset=UTF-8`: refusing it
    (the API's 400 for a body that is not JSON) would refuse the stock transport."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def route(request: Request) -> Response:
            declared = request.headers.get("content-type", "")
            if declared.partition(";")[0].strip().lower() == "text/plain":
                headers = [(k, v) for k, v in request.scope["headers"] if k != b"content-type"]
                scope = {
                    **request.scope,
                    "headers": [*headers, (b"content-type", b"application/json")],
                }
                request = Request(scope, request.receive)
            return await handler(request)

        return route


router = APIRouter(tags=["chat"], route_class=_StringBodies)

CHAT = "/v1/agents/{agent}/chat"
STREAM: dict[int | str, dict[str, Any]] = {
    200: {
        "content": {"text/event-stream": {}},
        "description": "The UI message stream (`x-vercel-ai-ui-message-stream: v1`), with the "
        "turn's id in `x-workflow-run-id`; it ends with a `finish` when the turn pauses for an "
        "approval, which the next POST answers",
    }
}


@router.post(
    CHAT,
    response_class=JSONResponse,
    responses={
        **STREAM,
        403: {"description": "The agent restricts its approvals to other keys (approvers)"},
        409: {
            "description": "The messages contradict the stored conversation, their last one "
            "cannot be answered (not a user message, no text or file part), or there is "
            "nothing to go on with"
        },
        422: {"description": "A body that is not the AI SDK chat transport's"},
    },
)
async def chat(res: Res, caller: Caller, agent: AgentClass, body: _chat.ChatBody) -> Any:
    """Answer useChat: `submit-message` with a new user message admits a turn for it (its id
    is the idempotency key: a resent POST is the same turn); `submit-message` ending with the
    assistant's message sends the approvals given in it and goes on with the paused turn;
    `regenerate-message` admits a new answer to the last user message."""
    conv = await res.store.get_conversation(
        tenant=caller.tenant, agent=agent.name, conversation_id=body.id
    )
    stored = [] if conv is None else await res.store.path(conv.uid, conv.active_leaf_id)
    asked = _chat.check_transcript(body, stored)
    if asked.new_message is not None:
        submission = SubmitTurnBody(
            input=[asked.new_message], mode="stream", client_tools=body.client_tools
        )
        return await _turns.submit(
            res,
            agent,
            submission,
            tenant=caller.tenant,
            conversation_id=body.id,
            idempotency_key=_chat.idempotency_key(asked.new_message),
            submitted_by=caller.key_name,
            chat=True,
        )
    if conv is None:  # a transcript of stored messages only: check_transcript said 409 before
        raise Problem(409, f"conversation {body.id!r} has no messages to go on with")
    if asked.regenerate_id is not None:
        return await _turns.regenerate(
            res,
            agent,
            conv,
            RegenerateBody(message_id=asked.regenerate_id, mode="stream"),
            tenant=caller.tenant,
            idempotency_key=None,
            chat=True,
        )
    return await _go_on(res, caller, agent, conv, asked)


async def _go_on(
    res: Res, caller: Principal, agent: type[Think], conv: Conversation, asked: _chat.ChatRequest
) -> Response:
    """After approvals or client tool results: send each through the path the HTTP routes
    take (decisions, tool results), then stream the rest of the turn from where the client's
    last request ended (its pause)."""
    turn = await _active_turn(res, conv)
    if turn is None or turn.message_id != asked.continued_id:
        raise Problem(
            409,
            f"no turn of conversation {conv.id!r} waits on message {asked.continued_id!r}; "
            "send a new user message instead",
            errors=[{"field": "messages", "message": "the last message waits for nothing"}],
        )
    after = await stream_tail(res.store, turn.id)
    pending = [
        d
        for d in asked.decisions
        if approval_request(turn, d.approval_id) is not None
        and not approval_decided(turn, d.approval_id)
    ]
    if pending and agent.approvers is not None and caller.key_name not in agent.approvers:
        raise Problem(
            403,
            f"this key may not decide {agent.name!r}'s approvals: the agent restricts them to "
            "its approvers' keys (Think.approvers); ask one of them",
        )
    for decision in pending:
        try:
            turn, _ = await _answers.answer_approval(
                res,
                turn,
                ToolDecision(
                    approval_id=decision.approval_id,
                    approved=decision.approved,
                    reason=decision.reason,
                    by="chat",
                    principal=caller.label,
                ),
            )
        except Problem as exc:
            if exc.status != 409:  # decided meanwhile by another door: the turn goes on
                raise
    # What the client answers that another door (the approvals route, another tab) answered
    # first: the turn may have gone on since, so the stream starts where it asked, not at
    # the tail, which may be mid-part (a text-end whose text-start the client never saw).
    overtaken_approvals = {
        d.approval_id
        for d in asked.decisions
        if approval_request(turn, d.approval_id) is not None and d not in pending
    }
    overtaken_calls = {
        o.tool_call_id
        for o in asked.outputs
        if client_tool_call(turn, o.tool_call_id) is not None
        and tool_call_answered(turn, o.tool_call_id)
    }
    if overtaken_approvals or overtaken_calls:
        at = await asked_at(res.store, turn.id, overtaken_approvals, overtaken_calls)
        if at is not None:
            after = min(after, at)
    for output in asked.outputs:
        if client_tool_call(turn, output.tool_call_id) is None:
            continue  # a server tool's output, which the client only shows
        if tool_call_answered(turn, output.tool_call_id):
            continue
        result = ToolResultSubmission(
            tool_call_id=output.tool_call_id, output=output.output, error=output.error
        )
        try:
            turn, _ = await _answers.answer_client_tool(res, turn, result)
        except Problem as exc:
            if exc.status != 409:  # answered meanwhile by another door: the turn goes on
                raise
    release = await res.limits.open_stream(caller.tenant)
    return _turns.chat_stream(res, turn, after, release, None)


async def _active_turn(res: Res, conv: Conversation) -> TurnRecord | None:
    """The conversation's newest turn that has not ended (running, queued or paused)."""
    active = await res.store.list_turns(
        conv.uid,
        status=["pending", "running", *sorted(PAUSED_STATUSES)],
        limit=1,
    )
    return active[0] if active else None


ChatId = Annotated[
    str,
    Path(
        pattern=ID_PATTERN,
        description="The conversation id, or the turn id a POST answered in x-workflow-run-id",
    ),
]


@router.get(
    f"{CHAT}/{{id}}/stream",
    response_class=JSONResponse,
    responses={
        **STREAM,
        204: {"description": "Nothing to resume: no active turn (or no such chat)"},
    },
)
async def resume_chat(
    res: Res,
    tenant: Tenant,
    agent: AgentClass,
    id: ChatId,
    start_index: Annotated[
        int | None,
        Query(
            alias="startIndex",
            ge=-(2**62),
            le=2**62,
            description="From chunk N (0 the first); negative: the last -N chunks, with the "
            "index of the stream's last chunk in x-workflow-stream-tail-index",
        ),
    ] = None,
) -> Any:
    """Resume a chat's stream: the conversation's active turn (204 when none, as useChat's
    default transport expects on every page load), or the turn of that id, ended or not."""
    conv = await res.store.get_conversation(tenant=tenant, agent=agent.name, conversation_id=id)
    turn = await _active_turn(res, conv) if conv is not None else None
    if conv is None:
        turn = await tenant_turn(res.store, tenant, agent.name, id)
    if turn is None:
        return Response(status_code=204)
    after = -1 if start_index is None else start_index - 1
    headers: dict[str, str] = {}
    if start_index is not None and start_index < 0:
        tail = await stream_tail(res.store, turn.id)
        after = max(-1, tail + start_index)
        headers["x-workflow-stream-tail-index"] = str(tail)
    release = await res.limits.open_stream(tenant)
    response = _turns.chat_stream(res, turn, after, release, None)
    response.headers.update(headers)
    return response
