"""Answers to a paused turn: a person's approval decision, a client tool's result.

The turn's stored message says what it waits for, so unknown and already-answered requests
are refused from Postgres without a round trip to Temporal. The answer is then recorded in
`turn_answers`, whose primary key settles a race between two answers to the same request (one
wins, the other is told 409), and signalled to the turn's workflow: the Temporal server
accepts a Signal whether or not a worker is running, so the route never waits for one. It
waits a moment for the answer to be applied, so that a read right after it usually sees the
new state (200); otherwise it answers 202, and the turn applies the recorded answer when a
worker picks it up.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from pydantic import BaseModel
from temporalio.service import RPCError

from api.deps import Resources
from api.errors import Problem
from think.server import (
    APPROVE,
    SUBMIT_TOOL_RESULT,
    TERMINAL_STATUSES,
    ActionRow,
    AnswerKind,
    ToolDecision,
    ToolResultSubmission,
    TurnRecord,
    approval_decided,
    approval_request,
    client_tool_call,
    decide_parked_action,
    parked_settled,
    public_turn_id,
    record_answer,
    tool_call_answered,
    turn_workflow_id,
    wait_for_turn,
)

log = logging.getLogger("think.api.answers")

APPLY_WAIT = 0.5
"""How long an answer route waits to see its answer applied before answering 202."""


def _decided(approval_id: str) -> Callable[[TurnRecord], bool]:
    return lambda t: approval_decided(t, approval_id)


def _answered(tool_call_id: str) -> Callable[[TurnRecord], bool]:
    return lambda t: tool_call_answered(t, tool_call_id)


async def answer_approval(
    res: Resources, turn: TurnRecord, decision: ToolDecision
) -> tuple[TurnRecord, bool]:
    """Record and send a decision; the turn as it stands, and whether the decision shows in
    it yet."""
    if approval_request(turn, decision.approval_id) is None:
        raise Problem(
            404,
            f"turn {public_turn_id(turn.id)!r} has no approval request {decision.approval_id!r}",
        )
    already = Problem(409, f"approval {decision.approval_id!r} is already decided")
    shown = _decided(decision.approval_id)
    return await _answer(res, turn, "approval", decision.approval_id, decision, shown, already)


async def answer_parked_action(res: Resources, row: ActionRow, decision: ToolDecision) -> bool:
    """Decide a parked action (the turn that asked for it has ended); whether it has run (or
    been refused) by the time this answers. A second decision is told 409: the first stands."""
    already = Problem(409, f"approval {decision.approval_id!r} is already decided")
    if row.status != "parked" or row.decision is not None:
        raise already
    if await decide_parked_action(res.store, res.temporal, row, decision) is None:
        raise already
    return await parked_settled(res.store, row.id, APPLY_WAIT) is not None


async def answer_client_tool(
    res: Resources, turn: TurnRecord, result: ToolResultSubmission
) -> tuple[TurnRecord, bool]:
    """Record and send a client tool's result; as `decide` answers."""
    if client_tool_call(turn, result.tool_call_id) is None:
        raise Problem(
            404,
            f"turn {public_turn_id(turn.id)!r} has no client tool call "
            f"{result.tool_call_id!r} to answer",
        )
    already = Problem(409, f"tool call {result.tool_call_id!r} already has a result")
    shown = _answered(result.tool_call_id)
    return await _answer(res, turn, "tool-result", result.tool_call_id, result, shown, already)


_SIGNALS: dict[AnswerKind, str] = {"approval": APPROVE, "tool-result": SUBMIT_TOOL_RESULT}
"""The turn workflow's Signal that carries each kind of answer."""


async def _answer(
    res: Resources,
    turn: TurnRecord,
    kind: AnswerKind,
    key: str,
    answer: BaseModel,
    shown: Callable[[TurnRecord], bool],
    taken: Problem,
) -> tuple[TurnRecord, bool]:
    """Refuse an answer the turn already shows or can no longer take (`taken`, a 409), record
    it (where a race between two answers to the same request is settled: the loser is told
    `taken` too), signal it, and wait a moment for the turn to show it (`shown`)."""
    if shown(turn) or turn.status in TERMINAL_STATUSES:
        raise taken
    async with res.store.db.transaction() as conn:
        if not await record_answer(conn, turn.id, kind, key, answer.model_dump(mode="json")):
            raise taken
    await _send(res, turn, _SIGNALS[kind], answer)
    return await _until(res, turn, shown)


async def _send(res: Resources, turn: TurnRecord, signal: str, payload: BaseModel) -> None:
    """Signal the recorded answer to the turn's workflow. Should Temporal be unreachable, the
    answer stays recorded: the workers' sweeper signals it again."""
    handle = res.temporal.get_workflow_handle(
        turn_workflow_id(turn.agent, turn.conversation_id, turn.id, tenant=turn.tenant)
    )
    try:
        await handle.signal(signal, payload)
    except RPCError as exc:
        log.warning("signalling %s to turn %s failed: %s", signal, turn.id, exc)


async def _until(
    res: Resources, turn: TurnRecord, done: Callable[[TurnRecord], bool]
) -> tuple[TurnRecord, bool]:
    """The turn once the answer is applied (or it ended), or as it stands after a moment."""
    current = await wait_for_turn(
        res.store,
        res.listener,
        turn.id,
        APPLY_WAIT,
        until=lambda current: done(current) or current.status in TERMINAL_STATUSES,
    )
    return current, done(current) or current.status in TERMINAL_STATUSES
