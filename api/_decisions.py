"""Answers to a paused turn: a person's approval decision, a client tool's result.

The turn's stored message says what it waits for, so unknown and already-answered requests
are refused from Postgres without a round trip to Temporal. The answer itself goes to the turn
workflow as an Update, whose validator settles a race between two answers to the same request
(one wins, the other is told 409). The route then waits, briefly, for the answer to be recorded,
so that a read right after it sees the new state.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import BaseModel
from temporalio.client import WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError

from api.deps import Resources
from api.errors import Problem
from think._admission import wait_for_turn
from think.storage import TERMINAL_STATUSES, TurnRecord
from think.workflows._inputs import ToolDecision, ToolResultSubmission
from think.workflows._names import (
    ALREADY_ANSWERED,
    ALREADY_DECIDED,
    APPROVE,
    SUBMIT_TOOL_RESULT,
    UNKNOWN_APPROVAL,
    UNKNOWN_TOOL_CALL,
    turn_workflow_id,
)

RECORD_WAIT = 5.0
_STATUS = {
    UNKNOWN_APPROVAL: 404,
    UNKNOWN_TOOL_CALL: 404,
    ALREADY_DECIDED: 409,
    ALREADY_ANSWERED: 409,
}


def _parts(turn: TurnRecord) -> list[dict[str, Any]]:
    return list((turn.message or {}).get("parts", []))


def _approval_part(turn: TurnRecord, approval_id: str) -> dict[str, Any] | None:
    for part in _parts(turn):
        if (part.get("approval") or {}).get("id") == approval_id:
            return part
    return None


def _tool_part(turn: TurnRecord, tool_call_id: str) -> dict[str, Any] | None:
    for part in _parts(turn):
        if part.get("toolCallId") == tool_call_id:
            return part
    return None


def _decided(approval_id: str) -> Callable[[TurnRecord], bool]:
    return lambda t: "approved" in ((_approval_part(t, approval_id) or {}).get("approval") or {})


def _answered(tool_call_id: str) -> Callable[[TurnRecord], bool]:
    return lambda t: str((_tool_part(t, tool_call_id) or {}).get("state", "")).startswith("output-")


async def decide(res: Resources, turn: TurnRecord, decision: ToolDecision) -> TurnRecord:
    part = _approval_part(turn, decision.approval_id)
    if part is None:
        raise Problem(404, f"turn {turn.id!r} has no approval request {decision.approval_id!r}")
    if _decided(decision.approval_id)(turn) or turn.status in TERMINAL_STATUSES:
        raise Problem(409, f"approval {decision.approval_id!r} is already decided")
    await _send(res, turn, APPROVE, decision)
    return await _until(res, turn, _decided(decision.approval_id))


async def submit_tool_result(
    res: Resources, turn: TurnRecord, result: ToolResultSubmission
) -> TurnRecord:
    part = _tool_part(turn, result.tool_call_id)
    clients = {str(t["name"]) for t in turn.request.client_tools}
    if part is None or str(part.get("type", ""))[len("tool-") :] not in clients:
        raise Problem(
            404, f"turn {turn.id!r} has no client tool call {result.tool_call_id!r} to answer"
        )
    if _answered(result.tool_call_id)(turn) or turn.status in TERMINAL_STATUSES:
        raise Problem(409, f"tool call {result.tool_call_id!r} already has a result")
    await _send(res, turn, SUBMIT_TOOL_RESULT, result)
    return await _until(res, turn, _answered(result.tool_call_id))


async def _send(res: Resources, turn: TurnRecord, update: str, payload: BaseModel) -> None:
    handle = res.temporal.get_workflow_handle(
        turn_workflow_id(turn.agent, turn.conversation_id, turn.id)
    )
    try:
        await handle.execute_update(update, payload)
    except WorkflowUpdateFailedError as exc:
        cause = exc.cause
        if isinstance(cause, ApplicationError) and cause.type in _STATUS:
            raise Problem(_STATUS[cause.type], cause.message) from None
        raise
    except RPCError as exc:
        # The workflow closed between our read and the update: the turn ended meanwhile.
        raise Problem(409, f"turn {turn.id!r} is no longer waiting ({exc.message})") from None


async def _until(
    res: Resources, turn: TurnRecord, done: Callable[[TurnRecord], bool]
) -> TurnRecord:
    """The turn once the answer is recorded (or it ended, or as it stands after a few seconds)."""
    return await wait_for_turn(
        res.store,
        res.listener,
        turn.id,
        RECORD_WAIT,
        until=lambda current: done(current) or current.status in TERMINAL_STATUSES,
    )
