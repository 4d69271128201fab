"""The activities of a turn, as a worker registers them: model step, tool call, the end of a
turn that no step ended, `on_chat_response`, and compaction after a turn.

This is where the I/O and the user's code run. Each activity is idempotent: it reads the turn
row under a lock, skips work a previous attempt already recorded, and writes its outcome and its
stream chunks in one transaction. The model step's phases are in `_model_step.py`, its other
endings in `_step_outcomes.py`; what they all share is one `ActivityResources`.
"""

from __future__ import annotations

import logging
from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError

from think import metrics
from think._protocol import UIMessageChunk
from think.agent import ChatResponseResult
from think.engine.activities import _observe as observe
from think.engine.activities._agent_tool import AgentToolCalls
from think.engine.activities._assembly import overrides
from think.engine.activities._compaction import Compactions
from think.engine.activities._eager_first_step import EarlySteps
from think.engine.activities._errors import chat_error_text
from think.engine.activities._heartbeat import heartbeating
from think.engine.activities._ids import turn_ids
from think.engine.activities._model_step import StepAttempt
from think.engine.activities._resources import ActivityResources
from think.engine.activities._run_turn import RunTurnActivities
from think.engine.activities._step_outcomes import StepOutcomes
from think.engine.activities._tool_call import ToolCalls
from think.engine.activities._turn_state import end_turn, end_with_error, keep_partial
from think.engine.activities._webhooks import WebhookActivities
from think.storage import bounded_failures, gives_up
from think.tools import maybe_await
from think.workflows.inputs import (
    CommitInput,
    CommitResult,
    ModelStepInput,
    ModelStepResult,
    TurnInput,
)
from think.workflows.names import CHAT_RESPONSE_ACTIVITY, COMMIT_ACTIVITY, MODEL_STEP_ACTIVITY

log = logging.getLogger("think.engine.activities")


class TurnActivities:
    """The activities of a turn, sharing one `ActivityResources` per worker."""

    def __init__(self, res: ActivityResources) -> None:
        self.res = res
        self.tool_calls = ToolCalls(res)
        self.agent_tools = AgentToolCalls(res, self.tool_calls)
        self.compactions = Compactions(res)
        self.outcomes = StepOutcomes(res)
        self.early_steps = EarlySteps(res, self.compactions, self.outcomes)
        """First steps begun beside their workflows' starts (`think.engine._eager_start`)."""
        self.webhooks = WebhookActivities(res)

    def activities(self) -> list[Any]:
        return [
            self.model_step,
            self.tool_calls.tool_call,
            self.commit_turn,
            self.chat_response,
            self.compactions.compact_context,
            *self.agent_tools.activities(),
            *RunTurnActivities(self.res).activities(),
            *self.webhooks.activities(),
        ]

    @activity.defn(name=MODEL_STEP_ACTIVITY)
    async def model_step(self, inp: ModelStepInput) -> ModelStepResult:
        """One model call, streamed. The first step also starts the turn; a step that answers
        without tools also ends it, in the transaction that records the step."""
        _count_retry(MODEL_STEP_ACTIVITY)
        # Taken once: a retry does it all itself.
        early = await self.early_steps.take(inp.turn_id) if inp.step == 0 else None
        with bounded_failures(f"model step {inp.step + 1}", inp.turn_id):
            step = StepAttempt(self.res, self.compactions, self.outcomes, inp, early)
            result = await step.run()
            if result.ended:
                # The conversation's next turn, if one waits, runs now (its workflow starts).
                await self.res.hand_off(inp.turn_id)
        if (result.ended or result.tool_calls) and self.webhooks.wanted(inp.agent):
            result = result.model_copy(update={"webhooks": True})
        return result

    @activity.defn(name=COMMIT_ACTIVITY)
    async def commit_turn(self, inp: CommitInput) -> CommitResult:
        """End a turn that no model step ended: a failure, or the step budget spent."""
        _count_retry(COMMIT_ACTIVITY)
        with bounded_failures("storing the end of the turn", inp.turn_id):
            try:
                result = await self._commit_turn(inp)
            except Exception as exc:
                if not gives_up(exc):
                    raise
                # The hooks' words or a chunk Postgres refuses: end it plainly instead.
                result = await self._end_plainly(inp, exc)
            await self.res.hand_off(inp.turn_id)
        if self.webhooks.wanted(inp.agent):
            result = result.model_copy(update={"webhooks": True})
        return result

    async def _end_plainly(self, inp: CommitInput, exc: BaseException) -> CommitResult:
        """The last resort of `commit_turn` once it has failed for good: end the turn `error`
        with its draft as stored and a fixed message, no hook run, so that the conversation
        goes on. What raises here ends the workflow; the sweeper then ends the turn
        (`end_abandoned`)."""
        log.error("turn %s: its end could not be stored", inp.turn_id, exc_info=exc)
        turn = await self.res.store.get_turn(inp.turn_id)
        if turn is None or turn.terminal:
            return CommitResult(status=turn.status if turn else "error")
        text = (
            "the turn failed because of an internal error "
            f"(the worker's log has the details under turn {turn.id})"
        )
        ended, turn = await end_with_error(self.res.store, inp.turn_id, text)
        if not ended:
            return CommitResult(status=turn.status)
        await observe.finished(turn, "error", reason=text)
        return CommitResult(status="error")

    async def _commit_turn(self, inp: CommitInput) -> CommitResult:
        turn = await self.res.store.get_turn(inp.turn_id)
        if turn is None:
            raise ApplicationError(f"turn {inp.turn_id!r} does not exist", non_retryable=True)
        agent = self.res.bound_agent(turn)
        respond = overrides(agent, "on_chat_response")
        if turn.terminal:
            return CommitResult(status=turn.status, respond=respond)
        message = turn.message or {"id": turn.message_id, "role": "assistant", "parts": []}
        error = inp.error
        chunks: list[UIMessageChunk] = []
        if inp.status == "aborted":
            chunks = [{"type": "abort", "reason": turn.error or inp.error or "cancelled"}]
            # A cancel's reason was recorded by whoever asked for it.
            error = turn.error or inp.error
        elif inp.status == "error":
            # What failed outside any step (a workflow-level failure) is internal: the client
            # gets the safe message, the hook and the log get the original.
            cause = RuntimeError(inp.error or "the turn failed")
            partial = bool(message["parts"])
            if partial and overrides(agent, "on_chat_error"):
                await keep_partial(self.res.store, turn.id, message)
            error = await chat_error_text(agent, turn, "turn", cause, partial)
            chunks = [{"type": "error", "errorText": error}]
        async with self.res.store.db.transaction() as conn:
            turn, queue = await self.res.store.lock_queue_turn(conn, inp.turn_id)
            if turn.terminal:
                return CommitResult(status=turn.status, respond=respond)
            await end_turn(
                self.res.store,
                conn,
                turn,
                queue,
                status=inp.status,
                message=message,
                chunks=chunks,
                error=error,
                finish_reason=inp.finish_reason,
            )
        if turn.steps_done > 0:
            await self.outcomes.step_finished(agent, turn, turn.steps_done - 1)
        finish_reason = inp.finish_reason if inp.status == "completed" else None
        await observe.finished(turn, inp.status, finish_reason=finish_reason, reason=error)
        compact = inp.status == "completed" and self.compactions.compacts_after_turns(agent)
        return CommitResult(
            status=inp.status, respond=respond and bool(message["parts"]), compact=compact
        )

    @activity.defn(name=CHAT_RESPONSE_ACTIVITY)
    async def chat_response(self, inp: TurnInput) -> None:
        """`on_chat_response`, once the turn is over: outside any turn, so it may run others."""
        with bounded_failures("on_chat_response", inp.turn_id):
            await self._chat_response(inp)

    async def _chat_response(self, inp: TurnInput) -> None:
        found = await self.res.ended_turn(inp.turn_id)
        if found is None:
            return
        turn, agent = found
        result = ChatResponseResult(
            **turn_ids(turn),
            status=turn.status,
            message=turn.message,
            output=turn.output,
            error=turn.error,
            usage=turn.usage,
        )
        try:
            async with heartbeating():
                await maybe_await(agent.on_chat_response(result))
        except Exception:
            # Reported, not retried: the hook may have started turns before it failed.
            log.warning("on_chat_response of turn %s failed", turn.id, exc_info=True)


def _count_retry(name: str) -> None:
    if activity.info().attempt > 1:
        metrics.ACTIVITY_RETRIES.labels(name).inc()
