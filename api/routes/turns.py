from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping
from datetime import UTC
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Body, Header, Path, Query, Response
from fastapi.responses import JSONResponse
from fastapi.types import DecoratedCallable

from api import _answers, _turns
from api._openapi import described
from api._sse import stream_response
from api.deps import (
    AgentClass,
    Caller,
    ConversationId,
    ExistingConversation,
    IdempotencyKey,
    Res,
    Tenant,
    TurnId,
)
from api.errors import Problem
from api.schemas import (
    ApprovalBody,
    CancelTurnBody,
    DeletedTurnsOut,
    IsoDateTime,
    SteerTurnBody,
    SubmitTurnBody,
    ToolResultBody,
    TurnOut,
    TurnsOut,
)
from think.server import (
    TERMINAL_STATUSES,
    Think,
    ToolDecision,
    ToolResultSubmission,
    TurnRecord,
    TurnStatus,
    action_ledger,
    approval_request,
    steer_turn,
)
from think.server import delete_turn as delete_turn_of
from think.server import delete_turns as delete_turns_of

log = logging.getLogger("think.api.turns")

_SEQUENCE_NUMBER = re.compile(r"-?[0-9]{1,20}")
"""A `Last-Event-ID`: a chunk's sequence number in at most 20 ASCII digits (a negative one
replays all). Bounded because `int()` refuses past 4,300 digits (a 500), and no stream gets
near 20; ASCII because `int()` also reads "1_0" as 10, and "+3" or "٣" as 3."""
_LAST_SEQUENCE = 2**63 - 1
"""The largest sequence number the stream log can hold (`bigint`): 20 digits may exceed it,
and "after it" is then simply nothing yet."""

EndedStatus = Literal["completed", "error", "aborted", "skipped", "interrupted"]
"""The statuses `DELETE .../turns` takes: the ended ones (`TERMINAL_STATUSES`), so the
document says that `pending` is refused (422), rather than only the route."""


router = APIRouter(tags=["turns"])

TURN = "/v1/agents/{agent}/conversations/{cid}/turns/{turn_id}"


@_turns.admission_route(
    router,
    "/v1/agents/{agent}/conversations/{cid}/turns",
    {
        409: "The Idempotency-Key was used with a different body, it and submission_id name "
        "different turns, or the conversation is busy and the submission's message_concurrency "
        "is drop"
    },
)
async def submit_turn(
    res: Res,
    caller: Caller,
    agent: AgentClass,
    cid: ConversationId,
    body: SubmitTurnBody,
    idempotency_key: IdempotencyKey = None,
) -> Any:
    taken = _server_tool_names(agent) if body.client_tools else set()
    for i, client_tool in enumerate(body.client_tools):
        if client_tool.name in taken:
            raise Problem(
                422,
                f"client tool {client_tool.name!r} has the name of one of the agent's tools",
                errors=[{"field": f"client_tools.{i}.name", "message": "name already taken"}],
            )
    return await _turns.submit(
        res,
        agent,
        body,
        tenant=caller.tenant,
        conversation_id=cid,
        idempotency_key=idempotency_key,
        submitted_by=caller.key_name,
    )


def _server_tool_names(agent: type[Think]) -> set[str]:
    """The agent's tool names, which a client tool may not take. The agent's own code runs
    here: when `get_tools` raises, the submission is still accepted unchecked (a server tool
    of the same name wins anyway) and its turn ends in `error` on the worker, which is where
    the agent's bug is reported; admission never answers 500 for it."""
    try:
        return set(agent().tools_by_name())
    except Exception:
        log.warning(
            "the tools of agent %s could not be listed; client tool names are not checked",
            agent.name,
            exc_info=True,
        )
        return set()


async def _turn(res: Res, conv: ExistingConversation, turn_id: str) -> TurnRecord:
    """The conversation's turn that the client names `turn_id`; from here on a route uses the
    record's own id (`turn.id`), which for a submission id is not the name."""
    turn = await res.store.find_turn(conv, turn_id)
    if turn is None:
        raise Problem(404, f"turn {turn_id!r} does not exist in conversation {conv.id!r}")
    return turn


@router.get(TURN, response_model=TurnOut)
async def get_turn(res: Res, conv: ExistingConversation, turn_id: TurnId) -> TurnOut:
    turn = await _turn(res, conv, turn_id)
    return _turns.turn_out(turn, base=_turns.base_url(res))


@router.get("/v1/agents/{agent}/conversations/{cid}/turns", response_model=TurnsOut)
async def list_turns(
    res: Res,
    conv: ExistingConversation,
    status: Annotated[list[TurnStatus] | None, Query()] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
) -> TurnsOut:
    turns = await res.store.list_turns(conv.uid, status=status or (), limit=limit)
    base = _turns.base_url(res)
    return TurnsOut(turns=[_turns.turn_out(t, base=base) for t in turns])


@router.delete(
    "/v1/agents/{agent}/conversations/{cid}/turns",
    response_model=DeletedTurnsOut,
    responses={422: {"description": "A status that is not an ended one"}},
)
async def delete_turns(
    res: Res,
    conv: ExistingConversation,
    status: Annotated[list[EndedStatus] | None, Query()] = None,
    before: Annotated[
        IsoDateTime | None, Query(description="Only turns submitted before this time")
    ] = None,
) -> DeletedTurnsOut:
    """Delete the conversation's ended turns (all, or those in `status`, submitted before
    `before`) with their streams; their messages stay. Active turns are never deleted."""
    active = [s for s in status or () if s not in TERMINAL_STATUSES]
    if active:
        raise Problem(
            422,
            f"only ended turns can be deleted; {active[0]!r} is not an ended status",
            errors=[{"field": "status", "message": f"{active[0]!r} is not an ended status"}],
        )
    if before is not None and before.tzinfo is None:
        before = before.replace(tzinfo=UTC)
    deleted = await delete_turns_of(res.store, conv.uid, status=status or (), before=before)
    return DeletedTurnsOut(deleted=deleted)


@router.delete(
    TURN,
    status_code=204,
    responses={
        404: {"description": "No such turn in the conversation"},
        409: {"description": "The turn has not ended: cancel it first"},
    },
)
async def delete_turn(res: Res, conv: ExistingConversation, turn_id: TurnId) -> Response:
    """Delete an ended turn's record and its stream; its messages stay in the conversation."""
    await delete_turn_of(res.store, conv, turn_id)
    return Response(status_code=204)


@router.get(
    f"{TURN}/stream",
    response_class=JSONResponse,
    responses={200: {"content": {"text/event-stream": {}}, "description": "UI message stream"}},
)
async def stream_turn(
    res: Res,
    tenant: Tenant,
    conv: ExistingConversation,
    turn_id: TurnId,
    last_event_id: Annotated[
        str | None,
        Header(
            alias="Last-Event-ID",
            # Said in the document, checked by `_after` (a 400, as for any bad header).
            json_schema_extra={"pattern": "^ *(-?[0-9]{1,20})? *$"},
            description="Resume after this chunk: its sequence number (the SSE `id`)",
        ),
    ] = None,
) -> Any:
    turn = await _turn(res, conv, turn_id)
    release = await res.limits.open_stream(tenant)
    return stream_response(res, turn.id, _after(last_event_id), release)


def _after(last_event_id: str | None) -> int:
    """The sequence number a `Last-Event-ID` names (-1, from the start, when none does).
    Only ASCII spaces around it are ignored: `str.strip()` would also drop what Latin-1 reads
    as Unicode whitespace (0x85, 0xA0, 0x1C-0x1F), so `5\\xa0` would have read as 5."""
    value = (last_event_id or "").strip(" ")
    if not value:
        return -1
    if not _SEQUENCE_NUMBER.fullmatch(value):
        shown = value if len(value) <= 40 else f"{value[:40]}… ({len(value)} characters)"
        raise Problem(
            400,
            f"Last-Event-ID must be a chunk sequence number (at most 20 digits), got {shown!r}",
            errors=[
                {"field": "Last-Event-ID", "message": "not a sequence number of at most 20 digits"}
            ],
        )
    return max(-1, min(int(value), _LAST_SEQUENCE))


@router.post(
    f"{TURN}/cancel",
    response_model=TurnOut,
    status_code=202,
    responses={200: {"description": "The turn had already ended; nothing changed"}},
)
async def cancel_turn(
    res: Res,
    conv: ExistingConversation,
    turn_id: TurnId,
    body: Annotated[CancelTurnBody | None, Body()] = None,
) -> Any:
    turn = await _turn(res, conv, turn_id)
    changed = await _turns.cancel(res, turn, (body or CancelTurnBody()).reason)
    current = await _turn(res, conv, turn_id)
    return _answer(res, current, status_code=202 if changed else 200)


@router.post(
    f"{TURN}/steer",
    response_model=TurnOut,
    status_code=202,
    responses={
        404: {"description": "No such turn in the conversation"},
        409: {"description": "The turn has ended: submit the words as a new turn"},
    },
)
async def steer(res: Res, conv: ExistingConversation, turn_id: TurnId, body: SteerTurnBody) -> Any:
    """Send a user's words to a running turn (the AI SDK's steering): each message joins the
    answer at the turn's next step boundary, where the model reads it, and the stream shows it
    as a `steering-message` chunk. A turn whose model has answered takes one more step for it;
    a turn that has ended answers 409 with its status."""
    await steer_turn(res.store, conv, turn_id, body.messages())
    return _answer(res, await _turn(res, conv, turn_id), status_code=202)


ToolCallId = Annotated[str, Path(min_length=1, max_length=200, description="The tool call id")]
ApprovalId = Annotated[str, Path(min_length=1, max_length=200, description="The approval id")]


def _answer_route(
    path: str, refusals: Mapping[int, str]
) -> Callable[[DecoratedCallable], DecoratedCallable]:
    """Declare a route that answers a paused turn (a decision, a client tool's result) as
    `_answer` shows it: 200 when the turn already shows the answer, 202 when it is recorded
    and the turn applies it later; and `refusals`, the route's own statuses."""
    return router.post(
        f"{TURN}/{path}",
        response_model=TurnOut,
        responses={
            202: {"description": "Recorded; the turn applies it when a worker picks it up"},
            **described(refusals),
        },
    )


@_answer_route(
    "approvals/{approval_id}",
    {
        403: "The agent restricts its approvals to other keys (approvers)",
        404: "The turn has no such approval request",
        409: "The request is already decided, or the turn has ended",
    },
)
async def decide_approval(
    res: Res,
    caller: Caller,
    agent: AgentClass,
    conv: ExistingConversation,
    turn_id: TurnId,
    approval_id: ApprovalId,
    body: ApprovalBody,
) -> Any:
    """Approve or deny a tool call the turn paused for, or an action it parked
    (`approval="durable_pause"`: the turn has ended, and the action runs once decided). The
    decision is recorded at once, worker or not; 200 when the turn already shows it (for a
    parked action: when it has run, or been refused), 202 when it will once a worker runs."""
    turn = await _turn(res, conv, turn_id)
    if agent.approvers is not None and caller.key_name not in agent.approvers:
        raise Problem(
            403,
            f"this key may not decide {agent.name!r}'s approvals: the agent restricts them to "
            "its approvers' keys (Think.approvers); ask one of them",
        )
    decision = ToolDecision(
        approval_id=approval_id,
        approved=body.approved,
        reason=body.reason,
        by="http",
        principal=caller.label,
    )
    if approval_request(turn, approval_id) is None:
        parked = await action_ledger.parked_action(res.store.db, turn.tenant, approval_id)
        if parked is not None and parked.turn_id == turn.id:
            applied = await _answers.answer_parked_action(res, parked, decision)
            return _answer(res, turn, status_code=200 if applied else 202)
    current, applied = await _answers.answer_approval(res, turn, decision)
    return _answer(res, current, status_code=200 if applied else 202)


def _answer(res: Res, turn: TurnRecord, *, status_code: int) -> JSONResponse:
    """The turn as a read shows it, with a status saying what the request changed."""
    out = _turns.turn_out(turn, base=_turns.base_url(res))
    return JSONResponse(out.model_dump(mode="json"), status_code=status_code)


@_answer_route(
    "tool-results/{tool_call_id}",
    {
        404: "The turn waits for no such client tool call",
        409: "The call already has a result, or the turn has ended",
    },
)
async def submit_tool_result(
    res: Res,
    conv: ExistingConversation,
    turn_id: TurnId,
    tool_call_id: ToolCallId,
    body: ToolResultBody,
) -> Any:
    """Answer a client tool call; the turn continues once every call of its step has one."""
    given = {"output", "error"} & body.model_fields_set
    if len(given) != 1:
        field = "error" if given else "output"
        raise Problem(
            422,
            'give exactly one of "output" and "error"',
            errors=[{"field": field, "message": "exactly one of output and error is required"}],
        )
    turn = await _turn(res, conv, turn_id)
    result = ToolResultSubmission(tool_call_id=tool_call_id, output=body.output, error=body.error)
    current, applied = await _answers.answer_client_tool(res, turn, result)
    return _answer(res, current, status_code=200 if applied else 202)
