"""What a client is told when a turn fails: safe by default, mapped by `on_chat_error`.

A model's refusal (`ModelError`) and an answer that failed validation are the client's business
and pass through. Anything else is a bug somewhere in the agent or the framework: the client
gets a generic message naming the turn, the worker log gets the traceback, and the hook gets
both (the original as `__cause__`) to decide otherwise.
"""

from __future__ import annotations

import logging

from think.agent import ChatErrorContext, ChatErrorStage, Think
from think.engine.activities._assembly import overrides
from think.exceptions import ModelError, OutputValidationError, TurnFailed, UserError
from think.models import ChatErrorClass, classify_model_error
from think.storage import TurnRecord
from think.tools import maybe_await

log = logging.getLogger("think.engine.activities")


def safe_error(turn: TurnRecord, stage: ChatErrorStage, exc: BaseException) -> TurnFailed:
    if isinstance(exc, TurnFailed):
        return exc
    if isinstance(exc, ModelError | UserError | OutputValidationError):
        error = TurnFailed(str(exc))
    else:
        log.error("turn %s failed in %s", turn.id, stage, exc_info=exc)
        error = TurnFailed(
            f"the turn failed in {stage} because of an internal error "
            f"(the worker's log has the details under turn {turn.id})"
        )
    error.__cause__ = exc
    return error


async def chat_error_text(
    agent: Think,
    turn: TurnRecord,
    stage: ChatErrorStage,
    exc: BaseException,
    partial_persisted: bool,
    *,
    classification: ChatErrorClass | None = None,
) -> str:
    """The error message the client sees: the safe error, or what `on_chat_error` returns.
    `classification` overrides what the error's words say it was (`classify_model_error`)."""
    error = safe_error(turn, stage, exc)
    if not overrides(agent, "on_chat_error"):
        return str(error)
    context = ChatErrorContext(
        agent=agent.name,
        conversation_id=turn.conversation_id,
        turn_id=turn.id,
        stage=stage,
        user_message_persisted=turn.started_at is not None or turn.status != "pending",
        partial_message_persisted=partial_persisted,
        classification=classification
        or (classify_model_error(exc) if isinstance(exc, ModelError) else None),
    )
    try:
        mapped = await maybe_await(agent.on_chat_error(error, context))
    except Exception:
        log.warning("on_chat_error of turn %s failed", turn.id, exc_info=True)
        return str(error)
    return str(error) if mapped is None else str(mapped)
