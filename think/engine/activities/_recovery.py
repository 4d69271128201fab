"""What every recovery of a lost model step shares, whatever lost it (a model failure, a stall,
a crash): the context `on_chat_recovery` and `on_exhausted` are shown, asking the first (what
it raises ends the turn, it never wedges it), telling the second, and settling what a lost
attempt left open so that its partial output can be kept as a finished step.

Only recoveries run any of this: a step that is not recovering reads and writes nothing here.
"""

from __future__ import annotations

import logging
from typing import Any

from think._protocol import (
    UIMessageChunk,
    is_settled,
    is_step_start,
    is_tool_part,
    last_step,
    last_step_text,
    tool_name,
)
from think.agent import ChatRecoveryContext, ChatRecoveryOptions, RecoveryKind, Think
from think.engine.activities._assembly import overrides
from think.storage import RecoveryNote, TurnRecord
from think.streaming import MessageBuilder
from think.tools import maybe_await

log = logging.getLogger("think.engine.activities")

INTERRUPTED_CALL = (
    "This tool call was interrupted before it ran: the step that made it was lost "
    "(its worker stopped). Call the tool again if it is still needed."
)
"""What a call the lost attempt streamed, but never got to run, is settled with when its
partial output is kept: the model reads it, and so does the user, instead of a call that
waits forever."""


class RecoveryHookFailed(Exception):
    """`on_chat_recovery` raised, or answered something that is not `ChatRecoveryOptions`:
    the turn ends `error` with the safe message (the original is the `__cause__`)."""


def recovery_context(
    agent: Think,
    turn: TurnRecord,
    step: int,
    kind: RecoveryKind,
    note: RecoveryNote,
    *,
    cause: str,
    parts: list[Any],
    failures: int,
) -> ChatRecoveryContext:
    """What the hooks are shown: `parts` is the whole message as the lost attempt left it."""
    partial = [dict(p) for p in last_step(parts)] if _has_step(parts) else []
    return ChatRecoveryContext(
        agent=agent.name,
        conversation_id=turn.conversation_id,
        turn_id=turn.id,
        step=step,
        kind=kind,
        incident_id=f"{turn.id}/recovery-{note.incident}",
        attempt=note.attempt,
        created_at=turn.started_at or turn.created_at,
        failures=failures,
        max_attempts=agent.chat_recovery.max_attempts,
        cause=cause,
        partial_text=last_step_text(parts) if partial else "",
        partial=partial,
        data=note.data,
    )


def _has_step(parts: list[Any]) -> bool:
    return any(is_step_start(p) for p in parts)


async def ask_recovery(agent: Think, context: ChatRecoveryContext) -> ChatRecoveryOptions:
    """`on_chat_recovery`'s answer (the defaults when it is not overridden or answers None).
    Raises `RecoveryHookFailed` when it raises or answers something else."""
    if not overrides(agent, "on_chat_recovery"):
        return ChatRecoveryOptions()
    try:
        answer = await maybe_await(agent.on_chat_recovery(context))
        if answer is None:
            return ChatRecoveryOptions()
        if isinstance(answer, ChatRecoveryOptions):
            return answer
        return ChatRecoveryOptions.model_validate(answer)
    except Exception as exc:
        raise RecoveryHookFailed(f"on_chat_recovery failed: {type(exc).__name__}") from exc


async def tell_exhausted(agent: Think, context: ChatRecoveryContext) -> None:
    """`on_exhausted`, once, before the turn ends `interrupted`: what it raises is logged, and
    the turn still ends."""
    if not overrides(agent, "on_exhausted"):
        return
    try:
        await maybe_await(agent.on_exhausted(context))
    except Exception:
        log.warning("on_exhausted of turn %s failed", context.turn_id, exc_info=True)


def no_progress(agent: Think, note: RecoveryNote) -> bool:
    """The no-progress budget is spent: this recovery is the one past `max_no_progress`
    recoveries in a row that found the turn no further on than the one before."""
    return note.stuck >= agent.chat_recovery.max_no_progress


def settle_partial(builder: MessageBuilder) -> list[UIMessageChunk]:
    """Close what the lost attempt left open in the builder's last step (a text or reasoning
    part mid-stream; a tool call it streamed but never ran, settled as an error the model and
    the user can read) and hand back the chunks that do so, applied already."""
    chunks: list[UIMessageChunk] = []
    for part in last_step(builder.parts):
        kind = part.get("type")
        if kind in ("text", "reasoning") and part.get("state") == "streaming":
            pass  # closed below, by id
        elif is_tool_part(part) and not is_settled(part):
            chunks.append(
                {
                    "type": "tool-input-error",
                    "toolCallId": str(part.get("toolCallId", "")),
                    "toolName": tool_name(part),
                    "input": part.get("input", {}),
                    "errorText": INTERRUPTED_CALL,
                }
            )
    closing: list[UIMessageChunk] = []
    for part_id in builder.open_text_ids():
        closing.append({"type": "text-end", "id": part_id})
    for part_id in builder.open_reasoning_ids():
        closing.append({"type": "reasoning-end", "id": part_id})
    closing.extend(chunks)
    for chunk in closing:
        builder.apply(chunk)
    return closing
