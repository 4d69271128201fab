"""Running a compaction: read the path as the model sees it, ask the session's compaction
function for a summary, check that it shortens the history, store it as an overlay, and say so
(`chat.context.compacted`).

Used by the worker (after a turn, and by overflow recovery inside a model step) and by
`ConversationHandle.compact()` in an application process; it needs only the store and the
settings, no Temporal.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from think import events, metrics
from think._messages import UIMessage
from think._settings import Settings
from think.agent._side_models import AskGateway, SideModel
from think.agent._think import Think
from think.exceptions import UserError
from think.models import ModelClient, ModelSpec
from think.sessions import (
    CompactionContext,
    CompactionResult,
    CompactionTrigger,
    apply_summaries,
    is_summary,
    session_for,
    summary_message,
)
from think.storage import (
    Compaction,
    Conn,
    StepUsage,
    Store,
    insert_summary,
    record_model_calls,
    summaries_on_path,
)
from think.tools import maybe_await

log = logging.getLogger("think.compaction")


async def model_view(conn: Conn, conversation_uid: str, path: list[UIMessage]) -> list[UIMessage]:
    """`path` as the model reads it: its stored summaries in place of the spans they cover."""
    summaries = await summaries_on_path(conn, conversation_uid, [m.id for m in path])
    return apply_summaries(path, summaries)


async def compact(
    store: Store,
    settings: Settings,
    agent: Think,
    *,
    conversation_uid: str,
    conversation_id: str,
    leaf_id: str | None,
    trigger: CompactionTrigger,
    turn_id: str | None = None,
    over: int | None = None,
    model: ModelSpec | None = None,
    gateway: AskGateway | None = None,
) -> Compaction | None:
    """Compact the path that ends at `leaf_id`; the stored summary, or None when there was
    nothing to do (no compaction function, the history within `over` tokens, nothing the
    function would summarise, or a summary no shorter than what it replaces).

    `model` is the model the turn runs with (the agent's by default), for a compaction
    function that summarises with "the agent's model"; it and every model the function
    resolves are reached through `gateway` (the agent's `get_gateway`, asked with
    `purpose="compaction"`), and what their answers spent is recorded (`model_calls`), whether
    the compaction then stores a summary, finds it no shorter, or fails. Raises what the
    function raises.
    """
    session = session_for(agent)
    if session.compaction is None:
        return None
    async with store.db.connection() as conn:
        path = await store.path(conversation_uid, leaf_id, conn)
        view = await model_view(conn, conversation_uid, path)
    metadata = {"conversation-id": conversation_id, "purpose": "compaction"}
    if turn_id:
        metadata["turn-id"] = turn_id
    spent: list[StepUsage] = []

    def side_model(spec: ModelSpec) -> ModelClient:
        return SideModel(spec, settings, gateway, spent)

    ctx = CompactionContext(
        agent=agent.name,
        conversation_id=conversation_id,
        trigger=trigger,
        messages=view,
        model=side_model(model if model is not None else agent.get_model()),
        settings=settings,
        count_tokens=session.count_tokens,
        turn_id=turn_id,
        metadata=metadata,
        resolver=side_model,
    )
    total = ctx.tokens(view)
    if over is not None and total <= over:
        return None
    try:
        result = await maybe_await(session.compaction(ctx))
    finally:
        await _record(store, agent.name, conversation_uid, turn_id, spent)
    if result is None:
        return None
    if not isinstance(result, CompactionResult):
        raise UserError(f"a compaction function must return a CompactionResult or None: {result!r}")
    first, last = _locate(ctx, view, result)
    replaced = view[first : last + 1]
    if len(replaced) == 1 and is_summary(replaced[0]):
        return None  # the same summary again: no progress
    before = ctx.tokens(replaced)
    after = ctx.tokens([summary_message(result)])
    if after >= before:
        log.info(
            "compaction of %s/%s skipped: the summary (%d tokens) is no shorter than the %d "
            "messages it would replace (%d tokens)",
            agent.name,
            conversation_id,
            after,
            len(replaced),
            before,
        )
        return None
    async with store.db.transaction() as conn:
        stored = await insert_summary(
            conn,
            conversation_uid,
            first_message_id=result.first_message_id,
            last_message_id=result.last_message_id,
            summary=result.summary,
            tokens_before=before,
            tokens_after=after,
            trigger=trigger,
            turn_id=turn_id,
        )
    if stored is None:
        return None  # this span has a summary already (a retried compaction)
    log.info(
        "compacted %s/%s (%s): %d messages, %d tokens -> one summary of %d tokens",
        agent.name,
        conversation_id,
        trigger,
        len(replaced),
        before,
        after,
    )
    await _emitted(
        events.ChatContextCompacted(
            agent=agent.name,
            conversation_id=conversation_id,
            turn_id=turn_id or "",
            trigger=trigger,
            messages_before=len(view),
            messages_after=len(view) - len(replaced) + 1,
            summary_tokens=after,
            tokens_before=total,
            tokens_after=total - before + after,
        )
    )
    return stored


def _locate(
    ctx: CompactionContext, view: Sequence[UIMessage], result: CompactionResult
) -> tuple[int, int]:
    """The indexes in `view` of the span `result` names; it must begin where a message (or an
    earlier summary) begins and end where one ends, and keep the newest message."""
    starts: dict[str, int] = {}
    ends: dict[str, int] = {}
    for i, message in enumerate(view):
        first, last = ctx.span(message)
        starts[first] = i
        ends[last] = i
    first_index = starts.get(result.first_message_id)
    last_index = ends.get(result.last_message_id)
    if first_index is None or last_index is None or first_index > last_index:
        raise UserError(
            f"the compaction function named a span that is not on the path: "
            f"{result.first_message_id!r} to {result.last_message_id!r}"
        )
    if last_index == len(view) - 1:
        raise UserError(
            f"the compaction function would summarise the newest message "
            f"({result.last_message_id!r}), which the model must read as it is"
        )
    return first_index, last_index


async def _record(
    store: Store, agent: str, conversation_uid: str, turn_id: str | None, spent: list[StepUsage]
) -> None:
    """Record what the summarising calls spent; a failure to is logged, never raised over the
    compaction's own outcome."""
    if not spent:
        return
    for call in spent:
        metrics.count_model_usage(agent, call)
    try:
        async with store.db.transaction() as conn:
            await record_model_calls(
                conn, conversation_uid, turn_id=turn_id, purpose="compaction", calls=spent
            )
    except Exception:
        log.warning("could not record what compaction in %s spent", conversation_uid, exc_info=True)


async def _emitted(event: events.ThinkEvent) -> None:
    try:
        await events.emit(event)
    except Exception:  # an event is never worth failing a compaction for
        log.warning("could not emit %s", event.type, exc_info=True)
