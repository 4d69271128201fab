"""Compaction in the worker: after a turn (`compact_after`), and context-overflow recovery
inside a model step (proactive before it, reactive after the provider refused it).

After a turn it runs in `think.AfterTurn`'s own activity, never on the turn's path. Proactive
compaction runs in the model step that needs it, before the model call; reactive compaction
runs in the step the provider refused, which then ends with a retry of itself (the next
attempt reads the compacted history and the stream drops the failed attempt's partial with
`reset-step`). Both budgets are counted in Postgres (the summaries a turn stored), so they hold
across attempts and workers.
"""

from __future__ import annotations

import logging
from typing import Literal

from temporalio import activity
from temporalio.exceptions import ApplicationError

from think._messages import UIMessage
from think._protocol import DataChunk
from think.agent import ChatErrorContext, StoredTurnConfig, Think, compact, model_view
from think.engine.activities._assembly import HookFailed, gateway_asker, overrides
from think.engine.activities._heartbeat import heartbeating
from think.engine.activities._resources import ActivityResources
from think.engine.activities._step_stream import StepStream
from think.exceptions import MODEL_RETRY, ModelError
from think.sessions import session_for
from think.storage import Compaction, TurnRecord, bounded_failures, is_transient, turn_compactions
from think.streaming import Fence, append, mark_attempt_failed
from think.tools import maybe_await
from think.workflows.inputs import TurnInput
from think.workflows.names import COMPACT_ACTIVITY

log = logging.getLogger("think.compaction")


COMPACT_MODEL_ATTEMPTS = 5
"""Attempts at compacting after a turn while the summarising model fails in a way that may
pass (a rate limit, a 5xx): then it is given up on, and the next turn tries again. Postgres
outages are retried longer, at the workflow's `COMPACT_RETRY`."""


class Compactions:
    """The compaction activity, and the overflow steps a model step calls."""

    def __init__(self, res: ActivityResources) -> None:
        self.res = res

    @activity.defn(name=COMPACT_ACTIVITY)
    async def compact_context(self, inp: TurnInput) -> None:
        """After a turn: compact when the history, as the model would read it now, is over the
        session's `compact_after`. A summarising model's failure that may pass is retried (a
        few times, by the workflow), and so is Postgres being away (`is_transient`); any other
        failure is logged, and the next turn tries again."""
        with bounded_failures("compaction", inp.turn_id):
            await self._compact_context(inp)

    async def _compact_context(self, inp: TurnInput) -> None:
        found = await self.res.ended_turn(inp.turn_id)  # `get_model` may read `get_config()`
        if found is None:
            return
        turn, agent = found
        session = session_for(agent)
        if session.compaction is None or session.threshold is None:
            return
        answered = await self.res.store.message_exists(turn.conversation_uid, turn.message_id)
        try:
            async with heartbeating():
                await compact(
                    self.res.store,
                    self.res.settings,
                    agent,
                    conversation_uid=turn.conversation_uid,
                    conversation_id=turn.conversation_id,
                    leaf_id=turn.message_id if answered else turn.parent_id,
                    trigger="between_turns",
                    turn_id=turn.id,
                    over=session.threshold,
                    model=StoredTurnConfig.read(turn.config).model,
                    gateway=gateway_asker(agent, turn, turn.steps_done, "compaction"),
                )
        except ModelError as exc:
            if exc.retryable and activity.info().attempt < COMPACT_MODEL_ATTEMPTS:
                raise
            log.warning("compaction after turn %s failed: %s", turn.id, exc)
        except Exception as exc:  # the agent's compaction function: its bug must not loop
            if is_transient(exc):
                raise  # Postgres away: retried (COMPACT_RETRY) until it is back
            log.warning("compaction after turn %s failed", turn.id, exc_info=True)

    def compacts_after_turns(self, agent: Think) -> bool:
        """Whether a finished turn of `agent` should be followed by a compaction check."""
        try:
            session = session_for(agent)
        except Exception:  # its model step has reported it already (HookFailed)
            return False
        return session.compaction is not None and session.threshold is not None

    async def model_context(
        self, agent: Think, turn: TurnRecord, transcript: list[UIMessage], step: int
    ) -> list[UIMessage]:
        """The step's transcript as the model reads it: summaries in place of what they cover,
        after a proactive compaction when the previous step came near the context window.
        Raises `HookFailed` when `configure_session` does."""
        try:
            session = session_for(agent)
        except Exception as exc:
            raise HookFailed("turn", exc) from exc
        if session.compaction is None:
            return transcript  # no compaction function: there are no summaries either
        policy = agent.context_overflow
        proactive = policy.proactive if policy is not None else None
        near = (
            proactive is not None
            and step > 0
            and _input_tokens(turn, step - 1) > proactive.threshold
        )
        if proactive is not None and near:
            async with self.res.store.db.connection() as conn:
                done = await turn_compactions(conn, turn.id, "proactive")
            if done < proactive.max_compactions:
                try:
                    await self._compact_in_step(agent, turn, step, "proactive")
                except Exception:  # the step may still fit: try it, and let reactive catch it
                    log.warning("proactive compaction in turn %s failed", turn.id, exc_info=True)
        async with self.res.store.db.connection() as conn:
            return await model_view(conn, turn.conversation_uid, transcript)

    async def on_overflow(
        self, agent: Think, turn: TurnRecord, step: StepStream, fence: Fence, exc: ModelError
    ) -> ModelError | None:
        """A model step failed. When the agent has `context_overflow` set and its
        `classify_chat_error` calls the failure a context overflow: with `reactive` on,
        compact and retry the step (raising the retry); else, or when that cannot help,
        answer the terminal error to end the turn with. None: not an overflow; the failure
        takes its usual path."""
        policy = agent.context_overflow
        if policy is None or not overrides(agent, "classify_chat_error"):
            return None
        context = ChatErrorContext(
            agent=agent.name,
            conversation_id=turn.conversation_id,
            turn_id=turn.id,
            stage="model",
            user_message_persisted=True,
            partial_message_persisted=False,
        )
        try:
            kind = await maybe_await(agent.classify_chat_error(exc, context))
        except Exception:
            log.warning("classify_chat_error of turn %s failed", turn.id, exc_info=True)
            return None
        if kind != "context_overflow":
            return None
        if policy.reactive:
            why = await self._compact_for_retry(agent, turn, step.step, policy.max_retries)
        else:
            why = "context_overflow.reactive is off"
        if why is not None:
            log.warning("turn %s: context overflow, and %s: %s", turn.id, why, exc)
            return ModelError(
                f"the conversation no longer fits the model's context window, and {why}: {exc}",
                retryable=False,
                status=exc.status,
            )
        rest = await step.writer.drain()  # a stale attempt: settled by StepAttempt.run
        compacted: DataChunk = {
            "type": "data-context-compacted",
            "data": {"trigger": "reactive", "cause": str(exc)},
            "transient": True,
        }
        async with self.res.store.db.transaction() as conn:
            await append(conn, turn.id, [*rest, compacted], fence)
            # A failure, not a crash: the retry asks again rather than keep this partial.
            await mark_attempt_failed(conn, turn.id, fence)
        log.warning("turn %s: context overflow; compacted, retrying step %d", turn.id, step.step)
        # The next attempt reads the compacted history; its `reset-step` drops this partial.
        raise ApplicationError(
            f"context overflow, compacted: {exc}", type=MODEL_RETRY, non_retryable=False
        ) from exc

    async def _compact_in_step(
        self, agent: Think, turn: TurnRecord, step: int, trigger: Literal["proactive", "reactive"]
    ) -> Compaction | None:
        """Compact what the turn's model step reads (the history up to the turn's user
        message), heartbeating meanwhile; the stored summary, or None when nothing changed."""
        async with heartbeating():
            return await compact(
                self.res.store,
                self.res.settings,
                agent,
                conversation_uid=turn.conversation_uid,
                conversation_id=turn.conversation_id,
                leaf_id=turn.parent_id,
                trigger=trigger,
                turn_id=turn.id,
                model=StoredTurnConfig.read(turn.config).model,
                gateway=gateway_asker(agent, turn, step, "compaction"),
            )

    async def _compact_for_retry(
        self, agent: Think, turn: TurnRecord, step: int, budget: int
    ) -> str | None:
        """Compact for a reactive retry; None when it did, else why it could not."""
        if session_for(agent).compaction is None:
            return "no compaction function is configured (configure_session)"
        async with self.res.store.db.connection() as conn:
            done = await turn_compactions(conn, turn.id, "reactive")
        if done >= budget:
            return f"compacting it {done} time(s) did not help (context_overflow.max_retries)"
        try:
            stored = await self._compact_in_step(agent, turn, step, "reactive")
        except Exception as exc:  # the agent's compaction function, or its model
            log.warning("reactive compaction in turn %s failed", turn.id, exc_info=True)
            return f"compacting it failed ({type(exc).__name__})"
        if stored is None:
            return "compaction cannot shorten it any further"
        return None


def _input_tokens(turn: TurnRecord, step: int) -> int:
    """The input tokens the provider reported for `step` of the turn (its total when it did
    not report input: an over-estimate, which compacts early rather than late)."""
    steps = turn.usage.get("steps", [])
    if step >= len(steps):
        return 0
    facts = steps[step]
    return int(facts.get("input_tokens", 0)) or int(facts.get("output_tokens", 0))
