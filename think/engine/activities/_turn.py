"""The activities of a turn: model step, tool call, commit.

This is where the I/O and the user's code run. Each activity is idempotent: it reads the turn
row under a lock, skips work a previous attempt already recorded, and writes its outcome and its
stream chunks in one transaction.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
from datetime import UTC, datetime
from typing import Any

from pydantic_core import to_jsonable_python
from temporalio import activity
from temporalio.client import Client
from temporalio.exceptions import ApplicationError

from think.agent._recovery import ChatRecoveryContext, ChatRecoveryOptions
from think.agent._think import Think
from think.agent._turn_hooks import ChatErrorStage, ChatResponseResult, StepFinishContext
from think.engine.activities import _observe as observe
from think.engine.activities._assembly import (
    HookFailed,
    assemble,
    maybe_await,
    overrides,
    previous_steps,
    turn_tools,
)
from think.engine.activities._cancels import cancel_noted, cancellable
from think.engine.activities._compaction import Compactions
from think.engine.activities._context import step_prompt
from think.engine.activities._errors import chat_error_text
from think.engine.activities._heartbeat import StreamStalled, heartbeating, within_stall_timeout
from think.engine.activities._observe import Which
from think.engine.activities._step_stream import StepStream
from think.engine.activities._tool_plan import (
    client_tool_names,
    paused_status,
    plan_calls,
    recorded_calls,
)
from think.engine.activities._turn_state import end_turn, start_turn
from think.exceptions import (
    MODEL_RETRY,
    STALE_ATTEMPT,
    ModelError,
    OutputValidationError,
)
from think.models import (
    Finish,
    ModelRequest,
    OutputSpec,
    ReasoningDelta,
    TextDelta,
    ToolCallDelta,
    ToolCallStart,
    ToolSpec,
    output_spec,
    supports_native_output,
    validate_output,
)
from think.models._overflow import ChatErrorClass
from think.storage import TurnRecord
from think.streaming import (
    ChunkListener,
    ChunkWriter,
    Fence,
    StaleAttempt,
    append,
    claim,
    count_failure,
    step_is_open,
)
from think.streaming._builder import MessageBuilder
from think.turns._dispatch import DispatchFailed, hand_off
from think.workflows._inputs import (
    CommitInput,
    CommitResult,
    ModelStepInput,
    ModelStepResult,
    TurnInput,
)
from think.workflows._names import (
    CHAT_RESPONSE_ACTIVITY,
    COMMIT_ACTIVITY,
    MODEL_STEP_ACTIVITY,
)

log = logging.getLogger("think.engine.activities")

ANSWER_TOOL = "final_answer"
"""Structured output without a native mode: the tool whose call is the answer."""


class TurnActivities(Compactions):
    """The activities of a turn, sharing one store, agent registry and settings per worker.

    `temporal` starts the conversation's next turn when one ends; `cancels` (a listener on
    `think_cancel`) lets a cancel reach a streaming step at once. The worker sets both."""

    temporal: Client | None = None
    cancels: ChunkListener | None = None

    async def hand_off(self, turn_id: str) -> None:
        """Start the workflow of the turn that waits behind this one, if any (the sweeper
        does it later if this fails)."""
        if self.temporal is None:
            return
        try:
            await hand_off(self.store, self.temporal, self.settings.task_queue, turn_id)
        except DispatchFailed:
            log.warning("turn %s ended, but its successor could not be started", turn_id)

    def activities(self) -> list[Any]:
        return [
            self.model_step,
            self.tool_call,
            self.commit_turn,
            self.chat_response,
            self.compact_context,
        ]

    # -- model step ------------------------------------------------------------------------

    @activity.defn(name=MODEL_STEP_ACTIVITY)
    async def model_step(self, inp: ModelStepInput) -> ModelStepResult:
        """One model call, streamed. The first step also starts the turn; a step that answers
        without tools also ends it, in the transaction that records the step."""
        result = await self._model_step(inp)
        if result.ended:
            # The conversation's next turn, if one waits, runs now (its workflow starts).
            await self.hand_off(inp.turn_id)
        return result

    async def _model_step(self, inp: ModelStepInput) -> ModelStepResult:
        fence = Fence(key=f"step-{inp.step}", attempt=0)
        async with self.store.db.transaction() as conn:
            turn = await self.store.lock_turn(conn, inp.turn_id, queue=True)
            agent = self._bound_agent(turn)
            if turn.terminal:
                return ModelStepResult(ended=True, status=turn.status)
            if turn.steps_done > inp.step:
                # A previous attempt finished this step but its completion never reached
                # Temporal: answer from what it recorded instead of calling the model again.
                return _recorded_step(turn, inp.step, agent)
            turn = await start_turn(self.store, conn, turn)
            if turn.terminal:
                return ModelStepResult(ended=True, status=turn.status)  # skipped as it started
            spent = _budget_spent(agent, turn) if inp.step > 0 else None
            if spent is not None:
                which, used, limit = spent
                # Checked between steps: the turn keeps what it has and stops asking the model.
                await end_turn(
                    self.store,
                    conn,
                    turn,
                    status="interrupted",
                    message=turn.message
                    or {"id": turn.message_id, "role": "assistant", "parts": []},
                    chunks=[],
                    error=_budget_message(which, used, limit),
                    finish_reason="length",
                )
            else:
                fence = await claim(conn, turn.id, fence.key)
                # A retry after a crash or a stall: the abandoned attempt may have streamed
                # part of this step, which clients must drop before this attempt streams it.
                interrupted = fence.attempt > 1 and await step_is_open(conn, turn.id)
                transcript = await self.paths.path(
                    conn,
                    turn.conversation_uid,
                    turn.parent_id,
                    revision=turn.messages_revision,
                    byte_budget=agent.hydration_byte_budget,
                )
        if inp.step > 0:
            await self._step_finished(agent, turn, inp.step - 1)
        if spent is not None:
            await observe.budget_exhausted(turn, which, used, limit)
            await observe.finished(turn, "interrupted", finish_reason="length")
            respond = overrides(agent, "on_chat_response")
            return ModelStepResult(ended=True, status="interrupted", respond=respond)
        builder = MessageBuilder(turn.message)
        try:
            # Summaries in place of what they cover; compacts first if the window is near.
            transcript = await self.model_context(agent, turn, transcript, inp.step)
            prompt = await step_prompt(agent, turn, inp.step, self.store)  # context blocks
            setup = await assemble(
                agent, turn, transcript, builder.message, inp.step, self.settings, prompt=prompt
            )
        except HookFailed as exc:
            return await self._fail(agent, turn, exc.stage, exc.cause, fence)
        model = setup.model
        specs = [t.spec for t in setup.tools.values()] + setup.client_specs
        native: OutputSpec | None = None
        answer_tool: str | None = None
        if setup.output is not None:
            wanted = output_spec(setup.output)
            if supports_native_output(model):
                native = wanted
            else:
                # No native structured output: the answer comes as a call of a tool of ours.
                answer_tool = ANSWER_TOOL
                specs.append(
                    ToolSpec(
                        name=ANSWER_TOOL,
                        description="Give your final answer by calling this tool, once.",
                        parameters=wanted.json_schema,
                    )
                )
        request = ModelRequest(
            model=model.name,
            messages=setup.messages,
            tools=specs,
            output=native,
            metadata={"conversation-id": turn.conversation_id, "turn-id": turn.id},
        )
        writer = ChunkWriter(
            self.store.db, turn.id, fence, interval=self.settings.chunk_flush_interval
        )
        step = StepStream(
            builder,
            writer,
            inp.step,
            send_reasoning=setup.send_reasoning,
            on_chunk=agent.on_chunk if overrides(agent, "on_chunk") else None,
            answer_tool=answer_tool,
        )
        finish = Finish()
        try:
            if interrupted:
                # Clients keep the step's `step-start` and drop what followed it; the draft
                # never held the abandoned attempt's parts, so it just starts the step.
                step.writer.emit({"type": "reset-step"})
                step.builder.apply({"type": "start-step"})
            else:
                step.emit({"type": "start-step"})
            # Closed here, not by the garbage collector, when the step fails mid-stream (say
            # Postgres went away): the model's HTTP stream ends now instead of generating on,
            # and asyncio no longer logs "aclose(): asynchronous generator is already running".
            async with (
                heartbeating(),
                cancellable(
                    self.store, self.cancels, turn.id, noted=turn.error is not None
                ) as cancel,
                # The time budget also cuts a step short, not only the next one.
                asyncio.timeout(_time_left(turn, setup.time_budget)) as budget,
                contextlib.aclosing(
                    within_stall_timeout(model.stream(request), setup.stall_timeout)
                ) as events,
            ):
                async for event in events:
                    if isinstance(event, TextDelta):
                        step.text(event.delta)
                    elif isinstance(event, ReasoningDelta):
                        step.reasoning(event.delta)
                    elif isinstance(event, ToolCallStart):
                        step.tool_start(event.tool_call_id, event.tool_name)
                    elif isinstance(event, ToolCallDelta):
                        step.tool_delta(event.tool_call_id, event.delta)
                    elif isinstance(event, Finish):
                        finish = event
            calls, approvals = await plan_calls(agent, turn, step.close(), builder, setup.tools)
            for chunk in approvals:
                step.emit(chunk)
            step.finish_step()
            rest = await writer.drain()
        except asyncio.CancelledError:
            details = activity.cancellation_details()
            if cancel.requested:
                # The turn was cancelled (`POST …/cancel`, through Postgres): keep what the
                # model said so far, end the stream with `abort`, and tell the workflow.
                await asyncio.shield(self._store_cancelled(turn.id, builder, step, writer))
                return ModelStepResult(ended=True, status="aborted")
            if (
                details is not None
                and details.cancel_requested
                and await asyncio.shield(cancel_noted(self.store, turn.id))
            ):
                # Cancelled by the workflow (its cancel reached it through Temporal): the same.
                # Only a cancel someone asked for counts: a local activity is also cancelled
                # when its workflow task was lost (its worker froze past the task's timeout).
                await asyncio.shield(self._store_cancelled(turn.id, builder, step, writer))
            else:
                # Not a cancel: this attempt timed out (a heartbeat arrived late under load),
                # or the worker is shutting down. Another attempt owns the step now; write
                # nothing more (its fence would refuse it anyway).
                await writer.abort()
            raise
        except StaleAttempt as exc:
            await writer.abort()
            raise ApplicationError(str(exc), type=STALE_ATTEMPT, non_retryable=True) from exc
        except TimeoutError:
            if not budget.expired():
                raise
            return await self._out_of_time(agent, turn, step, fence, setup.time_budget or 0)
        except ModelError as exc:
            await observe.request_failed(turn, inp.step, fence.attempt, exc)
            if isinstance(exc, StreamStalled):
                await observe.stalled(turn, inp.step, exc.seconds)
            # Context overflow: compacts and retries the step (raises), or ends the turn.
            overflow = await self.on_overflow(agent, turn, step, fence, exc)
            if overflow is not None:
                return await self._fail(
                    agent, turn, "model", overflow, fence, step, classification="context_overflow"
                )
            if not exc.retryable:
                return await self._fail(agent, turn, "model", exc, fence, step)
            return await self._recover(agent, turn, step, fence, exc)
        steps = [*turn.usage.get("steps", [])][: inp.step]
        steps.append(
            {
                "model": model.name,
                "input_tokens": finish.usage.input_tokens,
                "output_tokens": finish.usage.output_tokens,
                "finish_reason": finish.finish_reason,
            }
        )
        usage = {
            "input_tokens": turn.usage.get("input_tokens", 0) + finish.usage.input_tokens,
            "output_tokens": turn.usage.get("output_tokens", 0) + finish.usage.output_tokens,
            "steps": steps,
        }
        ended = not step.called_tools
        config: dict[str, Any] = {"config": setup.config} if setup.new_config else {}
        if ended and setup.output is not None:
            try:
                value = validate_output(setup.output, step.partial_text)
            except OutputValidationError as exc:
                return await self._fail(agent, turn, "output", exc, fence, step, rest)
            config["output"] = to_jsonable_python(value)
        async with self.store.db.transaction() as conn:
            current = await self.store.lock_turn(conn, turn.id, queue=ended)
            if current.terminal:
                # Cancelled while we were streaming: that outcome stands.
                return ModelStepResult(ended=True, status=current.status)
            if ended:
                await end_turn(
                    self.store,
                    conn,
                    turn,
                    status="completed",
                    message=builder.message,
                    chunks=rest,
                    fence=fence,
                    finish_reason=finish.finish_reason,
                    steps_done=inp.step + 1,
                    usage=usage,
                    **config,
                )
            else:
                clients = client_tool_names(turn)
                status = paused_status(builder.message, clients, setup.tools)
                await append(
                    conn,
                    turn.id,
                    rest,
                    fence,
                    message=builder.message,
                    steps_done=inp.step + 1,
                    usage=usage,
                    status=status,
                    **config,
                )
        done = turn.model_copy(update={"usage": usage, "message": builder.message})
        if ended:
            await self._step_finished(agent, done, inp.step)
            await observe.finished(done, "completed", finish_reason=finish.finish_reason)
        for chunk in approvals:
            name = next(c.tool_name for c in calls if c.tool_call_id == chunk["toolCallId"])
            await observe.approval_requested(turn, chunk, name)
        return ModelStepResult(
            ended=ended,
            status="completed" if ended else "running",
            max_steps=setup.max_steps,
            model=model.name,
            tool_calls=calls,
            called_tools=step.called_tools,
            finish_reason=finish.finish_reason,
            input_tokens=finish.usage.input_tokens,
            output_tokens=finish.usage.output_tokens,
            respond=ended and overrides(agent, "on_chat_response"),
            compact=ended and self.compacts_after_turns(agent),
        )

    async def _out_of_time(
        self, agent: Think, turn: TurnRecord, step: StepStream, fence: Fence, limit: float
    ) -> ModelStepResult:
        """The time budget ran out mid-step: keep what the model said, end `interrupted`."""
        try:
            rest = await step.writer.drain()
        except StaleAttempt as stale:
            raise ApplicationError(str(stale), type=STALE_ATTEMPT, non_retryable=True) from None
        closing = [*step.interrupt(), {"type": "finish-step"}]
        step.builder.apply({"type": "finish-step"})
        elapsed = _elapsed(turn)
        earlier = await self._end_once(
            turn,
            status="interrupted",
            message=step.builder.message,
            chunks=[*rest, *closing],
            fence=fence,
            error=_budget_message("seconds", elapsed, limit),
            finish_reason="length",
        )
        if earlier is not None:
            return ModelStepResult(ended=True, status=earlier)
        await observe.budget_exhausted(turn, "seconds", elapsed, limit)
        await observe.finished(turn, "interrupted", finish_reason="length")
        respond = overrides(agent, "on_chat_response")
        return ModelStepResult(ended=True, status="interrupted", respond=respond)

    async def _end_once(self, turn: TurnRecord, **outcome: Any) -> str | None:
        """End the turn with `outcome` (see `end_turn`), unless it has ended already (a cancel
        won the race): then nothing changes, and its status is returned."""
        async with self.store.db.transaction() as conn:
            current = await self.store.lock_turn(conn, turn.id, queue=True)
            if current.terminal:
                return current.status
            await end_turn(self.store, conn, turn, **outcome)
        return None

    async def _step_finished(self, agent: Think, turn: TurnRecord, step: int) -> None:
        """`on_step_finish` for a step whose tool results are all in (at least once: a retried
        activity may report it again)."""
        if not overrides(agent, "on_step_finish"):
            return
        results = previous_steps(turn.message, turn.usage)
        if step >= len(results):
            return
        context = StepFinishContext(
            **results[step].model_dump(),
            agent=agent.name,
            conversation_id=turn.conversation_id,
            turn_id=turn.id,
        )
        try:
            await maybe_await(agent.on_step_finish(context))
        except Exception:
            log.warning("on_step_finish of turn %s failed", turn.id, exc_info=True)

    async def _fail(
        self,
        agent: Think,
        turn: TurnRecord,
        stage: ChatErrorStage,
        exc: BaseException,
        fence: Fence,
        step: StepStream | None = None,
        drained: list[dict[str, Any]] | None = None,
        classification: ChatErrorClass | None = None,
    ) -> ModelStepResult:
        """End the turn as `error`, keeping what it produced, with what `on_chat_error` says.
        `drained`: chunks the caller already took from the step's writer; `classification`:
        what `on_chat_error` is told the failure was, when the caller knows better."""
        chunks: list[dict[str, Any]] = []
        message = turn.message or {"id": turn.message_id, "role": "assistant", "parts": []}
        if step is not None:
            try:
                pending = drained if drained is not None else await step.writer.drain()
                chunks = [*pending, *step.interrupt()]
            except StaleAttempt as stale:
                raise ApplicationError(str(stale), type=STALE_ATTEMPT, non_retryable=True) from exc
            if step.has_output:
                message = step.builder.message
            else:
                chunks = []  # only the `start-step` it wrote: close the stream cleanly
        text = await chat_error_text(
            agent, turn, stage, exc, bool(message["parts"]), classification=classification
        )
        earlier = await self._end_once(
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

    async def _recover(
        self,
        agent: Think,
        turn: TurnRecord,
        step: StepStream,
        fence: Fence,
        exc: ModelError,
    ) -> ModelStepResult:
        """A retryable failure (an error, a dropped or stalled stream): retry the step while the
        agent's `chat_recovery` budget lasts and `on_chat_recovery` agrees, then end the turn
        as `interrupted`."""
        try:
            rest = await step.writer.drain()
        except StaleAttempt as stale:
            raise ApplicationError(str(stale), type=STALE_ATTEMPT, non_retryable=True) from exc
        budget = agent.chat_recovery.max_attempts
        cause = str(exc)
        async with self.store.db.transaction() as conn:
            # The budget counts the model's failures, not Temporal's attempts: an attempt lost
            # to a Postgres or Temporal outage says nothing about the model.
            failures = await count_failure(conn, turn.id, fence)
        options = ChatRecoveryOptions()
        if failures < budget:
            options = await _recovery_options(agent, turn, step, failures, cause)
        recovering = {
            "type": "data-recovering",
            "data": {"attempt": failures + 1, "max_attempts": budget, "cause": cause},
            "transient": True,
        }
        if failures < budget and options.continue_ and options.persist and step.has_output:
            # Keep what the model said as a finished step; the next step continues from it.
            kept = [*rest, *step.interrupt(), {"type": "finish-step"}, recovering]
            step.builder.apply({"type": "finish-step"})
            async with self.store.db.transaction() as conn:
                await append(
                    conn,
                    turn.id,
                    kept,
                    fence,
                    message=step.builder.message,
                    steps_done=step.step + 1,
                )
            await observe.recovery(turn, step.step, failures, budget, cause, exhausted=False)
            return ModelStepResult(
                max_steps=agent.max_steps, called_tools=True, finish_reason="other"
            )
        if failures < budget and options.continue_:
            log.warning("turn %s: model failure %d of %d: %s", turn.id, failures, budget, cause)
            async with self.store.db.transaction() as conn:
                await append(conn, turn.id, [*rest, recovering], fence)
            await observe.recovery(turn, step.step, failures, budget, cause, exhausted=False)
            raise ApplicationError(cause, type=MODEL_RETRY) from exc
        if not options.continue_:
            cause = f"on_chat_recovery ended the turn after: {cause}"
            budget = failures
        log.warning("turn %s interrupted after %d attempts: %s", turn.id, budget, cause)
        # Drop the failed step's partial output and answer with the terminal message instead.
        builder = MessageBuilder(turn.message)
        builder.apply({"type": "start-step"})
        notice = agent.chat_recovery.terminal_message
        closing: list[dict[str, Any]] = [
            {"type": "reset-step"},
            {"type": "text-start", "id": "interrupted"},
            {"type": "text-delta", "id": "interrupted", "delta": notice},
            {"type": "text-end", "id": "interrupted"},
            {"type": "finish-step"},
        ]
        for chunk in closing[1:]:
            builder.apply(chunk)
        earlier = await self._end_once(
            turn,
            status="interrupted",
            message=builder.message,
            chunks=[*rest, *closing],
            fence=fence,
            error=f"interrupted after {budget} attempts: {cause}",
            finish_reason="interrupted",
        )
        if earlier is not None:
            return ModelStepResult(ended=True, status=earlier)
        await observe.recovery(turn, step.step, failures, budget, cause, exhausted=True)
        await observe.finished(turn, "interrupted", finish_reason="interrupted")
        respond = overrides(agent, "on_chat_response")
        return ModelStepResult(ended=True, status="interrupted", respond=respond)

    async def _store_cancelled(
        self, turn_id: str, builder: MessageBuilder, step: StepStream, writer: ChunkWriter
    ) -> None:
        try:
            # Everything the builder holds must reach the stream too, or the stored message
            # would differ from what clients rebuild.
            rest = await writer.drain()
        except StaleAttempt:
            return  # a newer attempt owns the turn; it will see the cancel itself
        async with self.store.db.transaction() as conn:
            turn = await self.store.lock_turn(conn, turn_id, queue=True)
            if turn.terminal:
                return
            chunks = rest + step.interrupt()
            await end_turn(
                self.store,
                conn,
                turn,
                status="aborted",
                message=builder.message,
                chunks=[*chunks, {"type": "abort", "reason": turn.error or "cancelled"}],
                fence=writer.fence,  # a superseded attempt must not end the turn
                error=turn.error or "cancelled",
            )
        await observe.finished(turn, "aborted", reason=turn.error or "cancelled")

    # -- commit ----------------------------------------------------------------------------

    @activity.defn(name=COMMIT_ACTIVITY)
    async def commit_turn(self, inp: CommitInput) -> CommitResult:
        """End a turn that no model step ended: a failure, or the step budget spent."""
        result = await self._commit_turn(inp)
        await self.hand_off(inp.turn_id)
        return result

    async def _commit_turn(self, inp: CommitInput) -> CommitResult:
        turn = await self.store.get_turn(inp.turn_id)
        if turn is None:
            raise ApplicationError(f"turn {inp.turn_id!r} does not exist", non_retryable=True)
        agent = self._bound_agent(turn)
        respond = overrides(agent, "on_chat_response")
        if turn.terminal:
            return CommitResult(status=turn.status, respond=respond)
        message = turn.message or {"id": turn.message_id, "role": "assistant", "parts": []}
        error = inp.error
        chunks: list[dict[str, Any]] = []
        if inp.status == "aborted":
            chunks = [{"type": "abort", "reason": turn.error or inp.error or "cancelled"}]
            # A cancel's reason was recorded by whoever asked for it.
            error = turn.error or inp.error
        elif inp.status == "error":
            # What failed outside any step (a workflow-level failure) is internal: the client
            # gets the safe message, the hook and the log get the original.
            cause = RuntimeError(inp.error or "the turn failed")
            error = await chat_error_text(agent, turn, "turn", cause, bool(message["parts"]))
            chunks = [{"type": "error", "errorText": error}]
        async with self.store.db.transaction() as conn:
            turn = await self.store.lock_turn(conn, inp.turn_id, queue=True)
            if turn.terminal:
                return CommitResult(status=turn.status, respond=respond)
            await end_turn(
                self.store,
                conn,
                turn,
                status=inp.status,
                message=message,
                chunks=chunks,
                error=error,
                finish_reason=inp.finish_reason,
            )
        if turn.steps_done > 0:
            await self._step_finished(agent, turn, turn.steps_done - 1)
        finish_reason = inp.finish_reason if inp.status == "completed" else None
        await observe.finished(turn, inp.status, finish_reason=finish_reason, reason=error)
        compact = inp.status == "completed" and self.compacts_after_turns(agent)
        return CommitResult(
            status=inp.status, respond=respond and bool(message["parts"]), compact=compact
        )

    @activity.defn(name=CHAT_RESPONSE_ACTIVITY)
    async def chat_response(self, inp: TurnInput) -> None:
        """`on_chat_response`, once the turn is over: outside any turn, so it may run others."""
        turn = await self.store.get_turn(inp.turn_id)
        if turn is None:
            return
        agent = self._bound_agent(turn)
        result = ChatResponseResult(
            agent=turn.agent,
            conversation_id=turn.conversation_id,
            turn_id=turn.id,
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


def _budget_spent(agent: Think, turn: TurnRecord) -> tuple[Which, float, float] | None:
    """Which budget forbids another model step, with what was used of it, if one does (the
    agent's, or what `before_turn` set for this turn)."""
    config = turn.config or {}
    max_tokens = config.get("turn_budget_tokens", agent.turn_budget_tokens)
    max_seconds = config.get("turn_budget_seconds", agent.turn_budget_seconds)
    tokens = turn.usage.get("input_tokens", 0) + turn.usage.get("output_tokens", 0)
    if max_tokens is not None and tokens >= max_tokens:
        return "tokens", tokens, max_tokens
    if max_seconds is not None and turn.started_at is not None:
        elapsed = (datetime.now(UTC) - turn.started_at).total_seconds()
        if elapsed >= max_seconds:
            return "seconds", elapsed, max_seconds
    return None


def _elapsed(turn: TurnRecord) -> float:
    started = turn.started_at or datetime.now(UTC)
    return (datetime.now(UTC) - started).total_seconds()


def _time_left(turn: TurnRecord, budget: float | None) -> float | None:
    """Seconds left of the turn's time budget (None: no budget); at least a moment, so a step
    that starts just in time is not refused before it sends anything."""
    if budget is None:
        return None
    return max(budget - _elapsed(turn), 0.05)


def _budget_message(which: Which, used: float, limit: float) -> str:
    if which == "tokens":
        return f"token budget spent: {used:g} of {limit:g} tokens used"
    return f"time budget spent: {used:.1f} of {limit:g} s"


async def _recovery_options(
    agent: Think, turn: TurnRecord, step: StepStream, failures: int, cause: str
) -> ChatRecoveryOptions:
    context = ChatRecoveryContext(
        agent=agent.name,
        conversation_id=turn.conversation_id,
        turn_id=turn.id,
        step=step.step,
        failures=failures,
        max_attempts=agent.chat_recovery.max_attempts,
        cause=cause,
        partial_text=step.partial_text,
    )
    answer = agent.on_chat_recovery(context)
    if inspect.isawaitable(answer):
        answer = await answer
    return answer if isinstance(answer, ChatRecoveryOptions) else ChatRecoveryOptions()


def _recorded_step(turn: TurnRecord, step: int, agent: Think) -> ModelStepResult:
    steps: list[list[dict[str, Any]]] = []
    for part in (turn.message or {}).get("parts", []):
        if part.get("type") == "step-start":
            steps.append([])
        elif steps:
            steps[-1].append(part)
    parts = steps[step] if step < len(steps) else []
    called = any(str(p.get("type", "")).startswith("tool-") for p in parts)
    return ModelStepResult(
        max_steps=(turn.config or {}).get("max_steps", agent.max_steps),
        tool_calls=recorded_calls(turn, parts, turn_tools(agent, turn)),
        called_tools=called,
        finish_reason="tool-calls" if called else "stop",
    )
