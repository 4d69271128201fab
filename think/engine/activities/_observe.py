"""The events activities emit (`think.events`), built from what an activity has at hand.

Emitted after the transaction that records the fact has committed, never inside it: a handler
may be slow, and the turn's row lock must not wait for it. Handlers run in the worker process
that ran the activity, so subscribe where the agents are imported.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Literal, ParamSpec

from think import events
from think._protocol import ToolApprovalRequestChunk
from think.engine.activities._ids import turn_ids
from think.exceptions import ModelError
from think.models import Usage, classify_model_error
from think.storage import TurnRecord

Which = Literal["seconds", "tokens", "cost"]
P = ParamSpec("P")
log = logging.getLogger("think.engine.activities")


def _safe(fn: Callable[P, Awaitable[None]]) -> Callable[P, Awaitable[None]]:
    """Observing a turn must never fail it: a bad event is logged, and the turn goes on."""

    @functools.wraps(fn)
    async def guarded(*args: P.args, **kwargs: P.kwargs) -> None:
        try:
            await fn(*args, **kwargs)
        except Exception:
            log.warning("could not emit %s", fn.__name__, exc_info=True)

    return guarded


@_safe
async def request_failed(turn: TurnRecord, step: int, attempt: int, exc: ModelError) -> None:
    await events.emit(
        events.ChatRequestFailed(
            **turn_ids(turn),
            step=step,
            attempt=attempt,
            error=str(exc),
            retryable=exc.retryable,
            classification=classify_model_error(exc),
            kind=exc.kind,
        )
    )


@_safe
async def stalled(turn: TurnRecord, step: int, seconds: float) -> None:
    await events.emit(events.ChatStreamStalled(**turn_ids(turn), step=step, timeout=seconds))


@_safe
async def recovery(
    turn: TurnRecord, step: int, failures: int, budget: int, cause: str, *, exhausted: bool
) -> None:
    if exhausted:
        event: events.ThinkEvent = events.ChatRecoveryExhausted(
            **turn_ids(turn), step=step, attempts=failures, cause=cause
        )
    else:
        event = events.ChatRecoveryAttempt(
            **turn_ids(turn), step=step, attempt=failures + 1, max_attempts=budget, cause=cause
        )
    await events.emit(event)


@_safe
async def budget_exhausted(turn: TurnRecord, which: Which, used: float, limit: float) -> None:
    await events.emit(
        events.ChatBudgetExhausted(**turn_ids(turn), which=which, used=used, limit=limit)
    )


@_safe
async def started(turn: TurnRecord, model: str, step: int, attempt: int) -> None:
    """The turn began to run: said once, by the first attempt of its first step."""
    if step != 0 or attempt != 1:
        return
    waited = datetime.now(UTC) - turn.created_at
    queued_ms = max(0, int(waited.total_seconds() * 1000))
    await events.emit(events.ChatTurnStarted(**turn_ids(turn), model=model, queued_ms=queued_ms))


@_safe
async def finished(
    turn: TurnRecord, status: str, *, finish_reason: str | None = None, reason: str | None = None
) -> None:
    """The turn reached `status`; an abort also says why (`chat.turn.cancelled`)."""
    if status == "aborted":
        await events.emit(events.ChatTurnCancelled(**turn_ids(turn), reason=reason))
    started = turn.started_at or turn.created_at
    usage = Usage(
        input_tokens=int(turn.usage.get("input_tokens", 0)),
        output_tokens=int(turn.usage.get("output_tokens", 0)),
    )
    elapsed = datetime.now(UTC) - started
    fields = {"status": status, "finish_reason": finish_reason, "usage": usage}
    duration_ms = int(elapsed.total_seconds() * 1000)
    event = events.ChatTurnFinished.model_validate(
        {**turn_ids(turn), **fields, "duration_ms": duration_ms}
    )
    await events.emit(event)


@_safe
async def tool_called(
    turn: TurnRecord,
    tool_name: str,
    tool_call_id: str,
    outcome: Literal["success", "error", "blocked", "substituted", "denied"],
    duration_ms: float = 0.0,
    error: str | None = None,
) -> None:
    await events.emit(
        events.ToolCalled(
            **turn_ids(turn),
            tool_name=tool_name,
            tool_call_id=tool_call_id,
            outcome=outcome,
            duration_ms=int(duration_ms),
            error=error,
        )
    )


@_safe
async def approval_requested(
    turn: TurnRecord, chunk: ToolApprovalRequestChunk, tool_name: str
) -> None:
    await events.emit(
        events.ToolApprovalRequested(
            **turn_ids(turn),
            approval_id=chunk["approvalId"],
            tool_name=tool_name,
            tool_call_id=chunk["toolCallId"],
        )
    )


@_safe
async def approval_decided(
    turn: TurnRecord,
    approval_id: str,
    tool_name: str,
    approved: bool,
    reason: str | None,
    by: str,
    principal: str | None = None,
) -> None:
    decision = {
        "approval_id": approval_id,
        "approved": approved,
        "reason": reason,
        "by": by,
        "principal": principal,
    }
    event = events.ToolApprovalDecided.model_validate(
        {**turn_ids(turn), **decision, "tool_name": tool_name}
    )
    await events.emit(event)
