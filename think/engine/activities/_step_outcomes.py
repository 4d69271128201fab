"""How a model step ends when it does not simply answer: out of time, failed, retried or
given up by the agent's `chat_recovery`, cancelled. Each ends the turn (or records what the
retry keeps) under the conversation's and the turn's locks, unless a cancel ended it first.

A stale attempt (a newer attempt took the step's fence) raises `StaleAttempt` from here as from
anywhere in the step: `StepAttempt.run` settles it, in one place.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from temporalio.exceptions import ApplicationError, ApplicationErrorCategory

from think._protocol import DataChunk, UIMessageChunk, UIMessageJSON
from think.agent import (
    ChatErrorStage,
    ChatRecoveryOptions,
    RecoveryKind,
    StepFinishContext,
    StoredTurnConfig,
    Think,
    stored_or,
)
from think.engine.activities import _observe as observe
from think.engine.activities._assembly import StepSetup, overrides, previous_steps
from think.engine.activities._errors import chat_error_text
from think.engine.activities._heartbeat import StreamStalled
from think.engine.activities._ids import turn_ids
from think.engine.activities._recovery import (
    RecoveryHookFailed,
    ask_recovery,
    no_progress,
    recovery_context,
    tell_exhausted,
)
from think.engine.activities._resources import ActivityResources
from think.engine.activities._step_budget import budget_message, elapsed
from think.engine.activities._step_stream import StepStream
from think.engine.activities._turn_state import end_turn, keep_partial
from think.exceptions import MODEL_RETRY, ModelError
from think.models import ChatErrorClass
from think.storage import TurnRecord, non_transient_failure, note_recovery, progress_of
from think.streaming import (
    ChunkWriter,
    Fence,
    MessageBuilder,
    StaleAttempt,
    TurnEnded,
    append,
    count_failure,
    step_is_open,
)
from think.tools import maybe_await
from think.workflows.inputs import ModelStepResult

log = logging.getLogger("think.engine.activities")


@dataclass(eq=False)
class StepOutcomes:
    """The endings of a model step other than its answer, shared by every step of a worker."""

    res: ActivityResources

    async def out_of_time(
        self, agent: Think, turn: TurnRecord, step: StepStream, fence: Fence, limit: float
    ) -> ModelStepResult:
        """The time budget ran out mid-step: keep what the model said, end `interrupted`."""
        rest = await step.writer.drain()
        closing = [*step.interrupt(), {"type": "finish-step"}]
        step.builder.apply({"type": "finish-step"})
        spent = elapsed(turn)
        earlier = await self.end_once(
            turn,
            status="interrupted",
            message=step.builder.message,
            chunks=[*rest, *closing],
            fence=fence,
            error=budget_message("seconds", spent, limit),
            finish_reason="length",
        )
        if earlier is not None:
            return ModelStepResult(ended=True, status=earlier)
        await observe.budget_exhausted(turn, "seconds", spent, limit)
        await observe.finished(turn, "interrupted", finish_reason="length")
        respond = overrides(agent, "on_chat_response")
        return ModelStepResult(ended=True, status="interrupted", respond=respond)

    async def end_once(self, turn: TurnRecord, **outcome: Any) -> str | None:
        """End the turn with `outcome` (see `end_turn`), unless it has ended already (a cancel
        won the race): then nothing changes, and its status is returned."""
        fence: Fence | None = outcome.get("fence")
        if fence is not None:
            await fence.held()  # before the turn's row is locked: the claim updates it
        async with self.res.store.db.transaction() as conn:
            current, queue = await self.res.store.lock_queue_turn(conn, turn.id)
            if current.terminal:
                return current.status
            await end_turn(self.res.store, conn, turn, queue, **outcome)
        return None

    async def step_finished(self, agent: Think, turn: TurnRecord, step: int) -> None:
        """`on_step_finish` for a step whose tool results are all in (at least once: a retried
        activity may report it again)."""
        if not overrides(agent, "on_step_finish"):
            return
        results = previous_steps(turn.message, turn.usage)
        if step >= len(results):
            return
        context = StepFinishContext(**results[step].model_dump(), **turn_ids(turn, agent.name))
        try:
            await maybe_await(agent.on_step_finish(context))
        except Exception:
            log.warning("on_step_finish of turn %s failed", turn.id, exc_info=True)

    async def fail(
        self,
        agent: Think,
        turn: TurnRecord,
        stage: ChatErrorStage,
        exc: BaseException,
        fence: Fence,
        step: StepStream | None = None,
        drained: list[UIMessageChunk] | None = None,
        classification: ChatErrorClass | None = None,
    ) -> ModelStepResult:
        """End the turn as `error`, keeping what it produced, with what `on_chat_error` says.
        `drained`: chunks the caller already took from the step's writer; `classification`:
        what `on_chat_error` is told the failure was, when the caller knows better."""
        if isinstance(exc, ModelError):
            # The one line an operator reads for it: the error names the endpoint, and for a
            # refused key the variable it is read from.
            log.warning("turn %s: the model failed, the turn ends: %s", turn.id, exc)
        chunks: list[UIMessageChunk] = []
        message = turn.message or {"id": turn.message_id, "role": "assistant", "parts": []}
        if step is not None:
            pending = drained if drained is not None else await step.writer.drain()
            chunks = [*pending, *step.interrupt()]
            if step.has_output:
                message = step.builder.message
            else:
                chunks = []  # only the `start-step` it wrote: close the stream cleanly
        partial = bool(message["parts"])
        if partial and overrides(agent, "on_chat_error"):
            await keep_partial(self.res.store, turn.id, message, fence)
        text = await chat_error_text(
            agent, turn, stage, exc, partial, classification=classification
        )
        return await self.end_error(agent, turn, message, chunks, text, fence)

    async def end_error(
        self,
        agent: Think,
        turn: TurnRecord,
        message: UIMessageJSON,
        chunks: list[UIMessageChunk],
        text: str,
        fence: Fence | None,
    ) -> ModelStepResult:
        """End the turn `error` with `message` and the stream's `chunks`, then `error` saying
        `text`; a turn a cancel ended first is left as it is."""
        earlier = await self.end_once(
            turn,
            status="error",
            message=message,
            chunks=[*chunks, {"type": "error", "errorText": text}],
            fence=fence,
            error=text,
        )
        if earlier is not None:
            return ModelStepResult(ended=True, status=earlier)
        await observe.finished(turn, "error")
        respond = bool(message["parts"]) and overrides(agent, "on_chat_response")
        return ModelStepResult(ended=True, status="error", respond=respond)

    async def give_up(
        self, turn_id: str, step: int, exc: BaseException, fence: Fence | None
    ) -> ModelStepResult:
        """End the turn `error` after a failure that is not transient and outlived its attempts
        where `fail` could not keep the partial answer (the failure came before the stream, or
        Postgres refused to store what the model said): the turn keeps its draft as stored,
        and a step this attempt left open in the stream is reset, so clients drop its partial
        output as the stored message does. Raises the non-retryable failure that ends the
        workflow's turn instead when even this cannot be written."""
        try:
            return await self._give_up(turn_id, step, exc, fence)
        except (StaleAttempt, TurnEnded):
            raise
        except Exception:
            log.error("turn %s: could not end it after a failure", turn_id, exc_info=True)
            raise non_transient_failure(f"model step {step + 1}", exc) from None

    async def _give_up(
        self, turn_id: str, step: int, exc: BaseException, fence: Fence | None
    ) -> ModelStepResult:
        turn = await self.res.store.get_turn(turn_id)
        if turn is None:
            raise non_transient_failure(f"model step {step + 1}", exc)
        if turn.terminal:
            return ModelStepResult(ended=True, status=turn.status)
        agent = self.res.bound_agent(turn)
        draft = turn.message or {"id": turn.message_id, "role": "assistant", "parts": []}
        builder = MessageBuilder(draft)
        chunks: list[UIMessageChunk] = []
        async with self.res.store.db.connection() as conn:
            if await step_is_open(conn, turn_id):
                chunks.append({"type": "reset-step"})
                builder.apply({"type": "start-step"})  # clients keep the step's `step-start`
        message = builder.message
        text = await chat_error_text(agent, turn, "model", exc, bool(message["parts"]))
        return await self.end_error(agent, turn, message, chunks, text, fence)

    async def recover(
        self,
        agent: Think,
        turn: TurnRecord,
        step: StepStream,
        fence: Fence,
        exc: ModelError,
        setup: StepSetup | None = None,
    ) -> ModelStepResult:
        """A retryable failure (an error, a dropped or stalled stream): retry the step while the
        agent's `chat_recovery` budgets last and `on_chat_recovery` agrees, then end the turn
        as `interrupted` (after `on_exhausted`)."""
        rest = await step.writer.drain()
        budget = agent.chat_recovery.max_attempts
        cause = str(exc)
        kind: RecoveryKind = "stall" if isinstance(exc, StreamStalled) else "model_error"
        async with self.res.store.db.transaction() as conn:
            # The budget counts the model's failures, not Temporal's attempts: an attempt lost
            # to a Postgres or Temporal outage says nothing about the model. The mark tells
            # the attempt that retries this one that it is no crash's recovery.
            failures = await count_failure(conn, turn.id, fence)
            note = await note_recovery(
                conn,
                turn.id,
                progress_of(step.builder.parts),
                mark=f"{fence.key}:failed-at",
                attempt=fence.attempt,
            )
        context = recovery_context(
            agent,
            turn,
            step.step,
            kind,
            note,
            cause=cause,
            parts=step.builder.parts,
            failures=failures,
        )
        exhausted = failures >= budget or no_progress(agent, note)
        options = ChatRecoveryOptions()
        if not exhausted:
            try:
                options = await ask_recovery(agent, context)
            except RecoveryHookFailed as failed:
                return await self.fail(agent, turn, "recovery", failed, fence, step, rest)
        recovering: DataChunk = {
            "type": "data-recovering",
            "data": {
                "attempt": failures + 1,
                "max_attempts": budget,
                "cause": cause,
                "kind": kind,
                "incident_id": context.incident_id,
            },
            "transient": True,
        }
        keep = options.keeps(kind) and step.has_output
        if not exhausted and options.continue_ and keep:
            # Keep what the model said as a finished step; the next step continues from it.
            kept: list[UIMessageChunk] = [
                *rest,
                *step.interrupt(),
                {"type": "finish-step"},
                recovering,
            ]
            step.builder.apply({"type": "finish-step"})
            # The step that made the turn's configuration (`before_turn`'s) stores it, as
            # `record` would have: the next step does not make it again.
            config: dict[str, Any] = {}
            if setup is not None and setup.new_config:
                config["config"] = None if setup.config is None else setup.config.as_json()
            async with self.res.store.db.transaction() as conn:
                await append(
                    conn,
                    turn.id,
                    kept,
                    fence,
                    message=step.builder.message,
                    steps_done=step.step + 1,
                    **config,
                )
            await observe.recovery(turn, step.step, failures, budget, cause, exhausted=False)
            return continued(agent, turn)
        if not exhausted and options.continue_:
            log.warning("turn %s: model failure %d of %d: %s", turn.id, failures, budget, cause)
            async with self.res.store.db.transaction() as conn:
                await append(conn, turn.id, [*rest, recovering], fence)
            await observe.recovery(turn, step.step, failures, budget, cause, exhausted=False)
            # Benign: an expected model failure, said once in the line above; Temporal then
            # logs the attempt's failure at DEBUG, not as a traceback a retry.
            raise ApplicationError(
                cause, type=MODEL_RETRY, category=ApplicationErrorCategory.BENIGN
            ) from exc
        if not exhausted:
            cause = f"on_chat_recovery ended the turn after: {cause}"
            if keep:
                ending: list[UIMessageChunk] = [*rest, *step.interrupt(), {"type": "finish-step"}]
                step.builder.apply({"type": "finish-step"})
                return await self.end_interrupted(
                    agent, turn, fence, step.builder.message, ending, cause
                )
        elif failures < budget:
            cause = f"no progress in {note.stuck + 1} recoveries in a row: {cause}"
        log.warning("turn %s interrupted after %d attempts: %s", turn.id, failures, cause)
        if exhausted:
            await tell_exhausted(agent, context)
        return await self.interrupt_with_notice(
            agent, turn, fence, rest, step.step, failures, cause, exhausted=exhausted
        )

    async def interrupt_with_notice(
        self,
        agent: Think,
        turn: TurnRecord,
        fence: Fence,
        rest: list[UIMessageChunk],
        index: int,
        attempts: int,
        cause: str,
        *,
        exhausted: bool,
    ) -> ModelStepResult:
        """End the turn `interrupted`, dropping the lost step's partial output (`reset-step`)
        and answering with the terminal message in its place."""
        builder = MessageBuilder(turn.message)
        builder.apply({"type": "start-step"})
        notice = agent.chat_recovery.terminal_message
        closing: list[UIMessageChunk] = [
            {"type": "reset-step"},
            {"type": "text-start", "id": "interrupted"},
            {"type": "text-delta", "id": "interrupted", "delta": notice},
            {"type": "text-end", "id": "interrupted"},
            {"type": "finish-step"},
        ]
        for chunk in closing[1:]:
            builder.apply(chunk)
        earlier = await self.end_once(
            turn,
            status="interrupted",
            message=builder.message,
            chunks=[*rest, *closing],
            fence=fence,
            error=f"interrupted after {attempts} attempts: {cause}",
            finish_reason="interrupted",
        )
        if earlier is not None:
            return ModelStepResult(ended=True, status=earlier)
        if exhausted:
            await observe.recovery(turn, index, attempts, attempts, cause, exhausted=True)
        await observe.finished(turn, "interrupted", finish_reason="interrupted")
        respond = overrides(agent, "on_chat_response")
        return ModelStepResult(ended=True, status="interrupted", respond=respond)

    async def end_interrupted(
        self,
        agent: Think,
        turn: TurnRecord,
        fence: Fence,
        message: UIMessageJSON,
        chunks: list[UIMessageChunk],
        cause: str,
    ) -> ModelStepResult:
        """End the turn `interrupted` keeping `message` (the partial output, as a finished
        step): `on_chat_recovery` said not to continue, and to keep it."""
        earlier = await self.end_once(
            turn,
            status="interrupted",
            message=message,
            chunks=chunks,
            fence=fence,
            error=cause,
            finish_reason="interrupted",
        )
        if earlier is not None:
            return ModelStepResult(ended=True, status=earlier)
        await observe.finished(turn, "interrupted", finish_reason="interrupted")
        respond = overrides(agent, "on_chat_response")
        return ModelStepResult(ended=True, status="interrupted", respond=respond)

    async def store_cancelled(
        self, turn_id: str, builder: MessageBuilder, step: StepStream, writer: ChunkWriter
    ) -> None:
        try:
            # Everything the builder holds must reach the stream too, or the stored message
            # would differ from what clients rebuild.
            rest = await writer.drain()
        except StaleAttempt:
            return  # a newer attempt owns the turn; it will see the cancel itself
        async with self.res.store.db.transaction() as conn:
            turn, queue = await self.res.store.lock_queue_turn(conn, turn_id)
            if turn.terminal:
                return
            chunks = rest + step.interrupt()
            await end_turn(
                self.res.store,
                conn,
                turn,
                queue,
                status="aborted",
                message=builder.message,
                chunks=[*chunks, {"type": "abort", "reason": turn.error or "cancelled"}],
                fence=writer.fence,  # a superseded attempt must not end the turn
                error=turn.error or "cancelled",
            )
        await observe.finished(turn, "aborted", reason=turn.error or "cancelled")


def continued(agent: Think, turn: TurnRecord) -> ModelStepResult:
    """A step whose partial output was kept as a finished step: the workflow goes on to the
    next step, which continues from it (no calls to run)."""
    max_steps = stored_or(StoredTurnConfig.read(turn.config).max_steps, agent.max_steps)
    return ModelStepResult(max_steps=max_steps, called_tools=True, finish_reason="other")
