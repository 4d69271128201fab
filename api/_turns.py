"""The logic behind the turn routes: admission, waiting and cancelling (shared with the Python
turn API in `think.turns._admission`), and the `Turn` view.

Admission is two steps: a Postgres transaction (which decides idempotency and the order of
the conversation's turns, and outlives Temporal's retention), then the start of the turn's
workflow when it is the conversation's turn to run.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from api.deps import Resources
from api.errors import Problem
from api.schemas import (
    PendingApproval,
    PendingClientTool,
    QueuedBehind,
    SubmitTurnBody,
    TurnOut,
)
from think import server
from think.server import RESEND_AFTER, DispatchFailed, hand_off
from think.storage import (
    PAUSED_STATUSES,
    TERMINAL_STATUSES,
    Admission,
    TurnRecord,
    TurnRequest,
    queue_head,
)

log = logging.getLogger("think.api.turns")

__all__ = ["RESEND_AFTER", "cancel", "schedule", "submit", "turn_out", "wait_for_turn"]

DEFAULT_WAIT = 600.0
HEAD_CHECK_EVERY = 1.0
"""Seconds between looks at the turn ahead while a wait-mode request's turn is pending."""


def request_hash(body: SubmitTurnBody) -> str:
    return server.request_hash(body.fingerprint())


async def submit(
    res: Resources,
    *,
    tenant: str,
    agent: str,
    conversation_id: str,
    body: SubmitTurnBody,
    idempotency_key: str | None,
) -> Admission:
    concurrency, debounce = server.resolve_concurrency(res.registry.get(agent), body.concurrency)
    request = TurnRequest(
        messages=body.messages(),
        parent_id=body.parent_id,
        body=body.body,
        client_tools=[t.model_dump() for t in body.client_tools],
        concurrency=concurrency,
        debounce_seconds=debounce,
    )
    try:
        return await server.admit(
            res.store,
            res.temporal,
            res.settings.task_queue,
            tenant=tenant,
            agent=agent,
            conversation_id=conversation_id,
            request=request,
            request_hash=request_hash(body),
            idempotency_key=idempotency_key,
            submission_id=body.submission_id,
        )
    except DispatchFailed as exc:
        raise _unavailable(exc) from exc


async def schedule(res: Resources, turn: TurnRecord) -> None:
    try:
        await hand_off(res.store, res.temporal, res.settings.task_queue, turn.id)
    except DispatchFailed as exc:
        raise _unavailable(exc) from exc


def _unavailable(exc: DispatchFailed) -> Problem:
    return Problem(
        503,
        f"{exc}; the turn is recorded: retry the request with the same Idempotency-Key",
        turn_id=exc.turn_id,
    )


def _turn_url(turn: TurnRecord, base: str) -> str:
    return f"{base}/v1/agents/{turn.agent}/conversations/{turn.conversation_id}/turns/{turn.id}"


def turn_out(
    turn: TurnRecord,
    *,
    accepted: bool,
    base: str,
    with_message: bool,
    queued_behind: TurnRecord | None = None,
) -> TurnOut:
    url = _turn_url(turn, base)
    show = with_message or turn.status in TERMINAL_STATUSES or turn.status in PAUSED_STATUSES
    parts: list[dict[str, Any]] = (turn.message or {}).get("parts", [])
    clients = {str(t["name"]) for t in turn.request.client_tools}
    return TurnOut(
        turn_id=turn.id,
        conversation_id=turn.conversation_id,
        agent=turn.agent,
        status=turn.status,
        accepted=accepted,
        idempotency_key=turn.idempotency_key,
        created_at=turn.created_at,
        started_at=turn.started_at,
        completed_at=turn.completed_at,
        message_id=turn.message_id,
        message=turn.message if show else None,
        error=turn.error,
        usage=turn.usage,
        output=turn.output,
        answered_by=turn.answered_by,
        pending_approvals=[
            PendingApproval(
                approval_id=p["approval"]["id"],
                tool_call_id=p["toolCallId"],
                tool_name=p["type"][5:],
                input=p.get("input"),
            )
            for p in parts
            if p.get("state") == "approval-requested" and not turn.terminal
        ],
        pending_client_tools=[
            PendingClientTool(
                tool_call_id=p["toolCallId"], tool_name=p["type"][5:], input=p.get("input")
            )
            for p in parts
            if p.get("state") == "input-available"
            and p["type"][5:] in clients
            and not turn.terminal
        ],
        queued_behind=None
        if queued_behind is None
        else QueuedBehind(
            turn_id=queued_behind.id,
            status=queued_behind.status,
            status_url=_turn_url(queued_behind, base),
        ),
        stream_url=f"{url}/stream",
        status_url=url,
    )


async def wait_for_turn(
    res: Resources, turn: TurnRecord, wait_timeout: float | None
) -> tuple[TurnRecord, TurnRecord | None]:
    """Until the turn is terminal or paused for a person, or `wait_timeout` passes (API.md);
    and the turn ahead of it, when it is the reason the wait ended.

    A turn queued behind one that waits for a person cannot start before someone decides,
    which may take days: such a wait answers at once, with the turn as it stands (pending)
    and the paused turn that holds it, instead of hanging for the whole `wait_timeout`.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + (wait_timeout or DEFAULT_WAIT)
    step = 0.0  # the first look is immediate
    while True:
        left = max(0.0, min(deadline - loop.time(), step))
        current = await server.wait_for_turn(res.store, res.listener, turn.id, left)
        if server.settled(current) or loop.time() >= deadline:
            return current, None
        if current.status == "pending":
            async with res.store.db.connection() as conn:
                head = await queue_head(conn, turn.id)
            if head is not None and head.id != turn.id and head.status in PAUSED_STATUSES:
                return current, head
        step = HEAD_CHECK_EVERY


async def cancel(res: Resources, turn: TurnRecord, reason: str) -> bool:
    """Cancel a turn; False when it had already ended (nothing changes then)."""
    return await server.cancel_turn(res.store, res.temporal, res.settings.task_queue, turn, reason)
