"""Turn admission, waiting and the turn view: the logic behind the turn routes.

Admission is two steps: a Postgres insert (which decides idempotency and outlives Temporal's
retention), then an update-with-start on the conversation's entity workflow. The update id is
the turn id, so a repeated update is dropped by Temporal as well as by the workflow.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
from datetime import UTC, datetime, timedelta
from typing import Any

from temporalio.service import RPCError

from api.deps import Resources
from api.errors import Problem
from api.schemas import PendingApproval, PendingClientTool, SubmitTurnBody, TurnOut
from think._dispatch import DispatchFailed, dispatch
from think.storage import PAUSED_STATUSES, TERMINAL_STATUSES, Admission, TurnRecord, TurnRequest
from think.streaming import append
from think.workflows._names import turn_workflow_id

log = logging.getLogger("think.api.turns")

# A duplicate submission re-sends the update only when the first one may have been lost
# (the gateway died between the Postgres commit and Temporal); before that, it is surely
# still in flight and a re-send would only add load.
RESEND_AFTER = timedelta(seconds=1)
DEFAULT_WAIT = 600.0


def request_hash(body: SubmitTurnBody) -> str:
    canonical = json.dumps(body.fingerprint(), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


async def submit(
    res: Resources,
    *,
    tenant: str,
    agent: str,
    conversation_id: str,
    body: SubmitTurnBody,
    idempotency_key: str | None,
) -> Admission:
    request = TurnRequest(
        messages=body.messages(),
        parent_id=body.parent_id,
        body=body.body,
        client_tools=[t.model_dump() for t in body.client_tools],
    )
    admission = await res.store.admit_turn(
        tenant=tenant,
        agent=agent,
        conversation_id=conversation_id,
        request=request,
        request_hash=request_hash(body),
        idempotency_key=idempotency_key,
    )
    turn = admission.turn
    age = datetime.now(UTC) - turn.created_at
    if admission.accepted or (turn.status == "pending" and age > RESEND_AFTER):
        await schedule(res, turn)
    return admission


async def schedule(res: Resources, turn: TurnRecord) -> None:
    try:
        await dispatch(res.temporal, res.settings.task_queue, turn)
    except DispatchFailed as exc:
        raise Problem(
            503,
            f"{exc}; the turn is recorded: retry the request with the same Idempotency-Key",
            turn_id=turn.id,
        ) from exc


def turn_out(turn: TurnRecord, *, accepted: bool, base: str, with_message: bool) -> TurnOut:
    url = f"{base}/v1/agents/{turn.agent}/conversations/{turn.conversation_id}/turns/{turn.id}"
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
        stream_url=f"{url}/stream",
        status_url=url,
    )


async def wait_for_turn(res: Resources, turn: TurnRecord, wait_timeout: float | None) -> TurnRecord:
    """Until the turn is terminal or paused for a person, or `timeout` passes."""
    deadline = asyncio.get_running_loop().time() + (wait_timeout or DEFAULT_WAIT)
    with res.listener.subscribe(turn.id) as event:
        while True:
            event.clear()
            current = await res.store.get_turn(turn.id)
            assert current is not None
            if current.status in TERMINAL_STATUSES or current.status in PAUSED_STATUSES:
                return current
            left = deadline - asyncio.get_running_loop().time()
            if left <= 0:
                return current
            # Wake on chunks; re-check at least every few seconds in case a NOTIFY was
            # missed while the listener reconnected.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(event.wait(), timeout=min(left, 5.0))


async def cancel(res: Resources, turn: TurnRecord, reason: str) -> bool:
    """Cancel a turn; False when it had already ended (nothing changes then).

    A turn still queued is aborted right here, before it ever calls the model or appends its
    user message. A running one is cancelled through Temporal: the cancel reaches its activity
    at the next heartbeat, which stores the partial answer and ends the stream with `abort`.
    """
    if turn.status in TERMINAL_STATUSES:
        return False
    async with res.store.db.transaction() as conn:
        if await res.store.abort_if_pending(conn, turn.id, reason):
            await append(conn, turn.id, [{"type": "abort", "reason": reason}])
            return True
        await res.store.note_cancel(conn, turn.id, reason)
    handle = res.temporal.get_workflow_handle(
        turn_workflow_id(turn.agent, turn.conversation_id, turn.id)
    )
    try:
        await handle.cancel()
    except RPCError as exc:
        # Already finished between our read and the cancel: it ended on its own.
        log.info("cancel of turn %s: %s", turn.id, exc)
    return True
