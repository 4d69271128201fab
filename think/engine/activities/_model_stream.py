"""A step's model answer, streamed: the request sent, the answer's events turned into chunks
(`StepStream`) and batched into the stream log (`ChunkWriter`), and what goes wrong on the way
(a cancel, the time budget, a stall, a model failure) handed to `StepOutcomes`.

Split from `_model_step.py`, which runs the attempt around it (load, assemble, record): this
is the part that runs while the model speaks.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable
from dataclasses import dataclass, field
from typing import Any

from temporalio import activity

from think import metrics
from think._messages import UIMessage
from think._protocol import SteeringMessageChunk, ToolApprovalRequestChunk, UIMessageChunk
from think.agent import Think
from think.engine.activities import _observe as observe
from think.engine.activities._assembly import StepSetup
from think.engine.activities._cancels import cancel_noted, cancellable
from think.engine.activities._compaction import Compactions
from think.engine.activities._heartbeat import StreamStalled, heartbeating, within_stall_timeout
from think.engine.activities._resources import ActivityResources
from think.engine.activities._step_budget import time_left
from think.engine.activities._step_outcomes import StepOutcomes
from think.engine.activities._step_stream import StepStream
from think.engine.activities._tool_plan import plan_calls
from think.exceptions import ModelError
from think.models import (
    Checkpoint,
    Finish,
    ModelEvent,
    ModelRequest,
    ReasoningDelta,
    TextDelta,
    ToolCallDelta,
    ToolCallStart,
    answering,
)
from think.storage import TurnRecord, gives_up
from think.streaming import Fence, FirstClaim, MessageBuilder, StaleAttempt, set_checkpoint
from think.workflows.inputs import ModelStepResult

log = logging.getLogger("think.engine.activities")


@dataclass
class LoadedStep:
    """What `load` read for a step that is to call the model."""

    turn: TurnRecord
    agent: Think
    fence: Fence
    interrupted: bool
    """A retry after a crash or a stall that left this step open in the stream."""
    transcript: list[UIMessage]
    resume: dict[str, Any] | None = None
    """The checkpoint an abandoned attempt of this step recorded (`set_checkpoint`)."""
    crashed: bool = False
    """`interrupted`, by an attempt that never finished (not a model failure it recovered
    from): `recover_crash` settles what it streamed before the model is asked again."""


@dataclass
class PreparedStep:
    """A step's request, assembled by the agent's hooks, and the model's answer to it, on its
    way."""

    builder: MessageBuilder
    setup: StepSetup
    request: ModelRequest
    answer_tool: str | None
    events: AsyncIterator[ModelEvent]
    sent: float
    """When the request went out (`time.monotonic`), for the time to its first token."""
    steering: list[SteeringMessageChunk] = field(default_factory=list)
    """The users' steering messages this step delivers (`pending_steering`): in the builder
    already, after the step's `step-start`, so the request holds them; the stream gets them
    right after the step's `start-step` (or `reset-step`: a retry delivers them again, in the
    step the client drops and rebuilds, so never twice)."""


class CancelSubscription:
    """The turn's subscription to cancels (`ActivityResources.cancels`), opened before a step
    reads the turn and kept until the step ends: a cancel announced between the read, which
    sees one noted before it, and the stream, which watches for one, is not missed."""

    def __init__(self, res: ActivityResources, turn_id: str) -> None:
        self._stack = contextlib.ExitStack()
        self.event: asyncio.Event | None = None
        if res.cancels is not None:
            self.event = self._stack.enter_context(res.cancels.subscribe(turn_id))

    def close(self) -> None:
        self._stack.close()


class SentRequest:
    """A model stream whose request is sent now, not at the first `anext`: a task waits for
    its first event meanwhile. Iterated like the stream itself, by one consumer."""

    def __init__(self, events: AsyncIterator[ModelEvent]) -> None:
        self._events = events
        self._first: asyncio.Task[ModelEvent] | None = asyncio.create_task(_first_of(events))

    def __aiter__(self) -> SentRequest:
        return self

    async def __anext__(self) -> ModelEvent:
        first = self._first
        if first is None:
            return await anext(self._events)
        try:
            return await first  # a stream that ended at once raises StopAsyncIteration here
        finally:
            if first.done():
                self._first = None

    async def aclose(self) -> None:
        first, self._first = self._first, None
        if first is not None:
            first.cancel()
            await asyncio.wait([first])  # the stream must not be running when it is closed
        await close_events(self._events)


async def _first_of(events: AsyncIterator[ModelEvent]) -> ModelEvent:
    return await anext(events)


async def close_events(events: AsyncIterator[Any]) -> None:
    close = getattr(events, "aclose", None)
    if close is not None:
        await close()


@dataclass
class Streamed:
    """What `stream` got from the model."""

    finish: Finish
    calls: list[Any]
    approvals: list[ToolApprovalRequestChunk]
    rest: list[UIMessageChunk]
    """Chunks still buffered, written in `record`'s transaction."""


async def stream_answer(
    res: ActivityResources,
    outcomes: StepOutcomes,
    compactions: Compactions,
    cancels: CancelSubscription,
    index: int,
    loaded: LoadedStep,
    prepared: PreparedStep,
    step: StepStream,
) -> Streamed | ModelStepResult:
    """Step `index`'s `start-step`, the model's answer as chunks, the calls it made planned
    and the step finished; or, when something goes wrong on the way, what `StepOutcomes`
    settles it as (a cancel, the time budget, a model failure, an overflow)."""
    agent, turn, fence = loaded.agent, loaded.turn, loaded.fence
    setup, builder, writer = prepared.setup, step.builder, step.writer
    finish = Finish()
    started = prepared.sent
    first_token: float | None = None
    checkpoint = loaded.resume
    """The answer's checkpoint, recorded: what a cancel stops at the provider."""
    try:
        if prepared.steering:
            # The builder holds the step's start and its steering messages already.
            if loaded.interrupted:
                step.announce({"type": "reset-step"})
            else:
                step.announce({"type": "start-step"})
            for steering in prepared.steering:
                step.announce(steering)
        elif loaded.interrupted:
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
                res.store,
                res.cancels,
                turn.id,
                noted=turn.error is not None,
                subscribed=cancels.event,
            ) as cancel,
            # The time budget also cuts a step short, not only the next one.
            asyncio.timeout(time_left(turn, setup.time_budget)) as budget,
            contextlib.aclosing(
                within_stall_timeout(prepared.events, setup.stall_timeout)
            ) as events,
        ):
            async for event in events:
                if first_token is None and not isinstance(event, Finish):
                    first_token = time.monotonic()
                    metrics.TIME_TO_FIRST_TOKEN.labels(turn.agent).observe(first_token - started)
                if isinstance(event, TextDelta):
                    step.text(event.delta)
                    await writer.let_first_content_out()  # the words a user waits for
                elif isinstance(event, ReasoningDelta):
                    step.reasoning(event.delta, event.provider_metadata)
                    await writer.let_first_content_out()
                elif isinstance(event, ToolCallStart):
                    step.tool_start(event.tool_call_id, event.tool_name)
                elif isinstance(event, ToolCallDelta):
                    step.tool_delta(event.tool_call_id, event.delta)
                elif isinstance(event, Checkpoint):
                    checkpoint = event.resume
                    await record_checkpoint(res, turn.id, fence, checkpoint)
                elif isinstance(event, Finish):
                    finish = event
        calls, approvals = await plan_calls(agent, turn, step.close(), builder, setup.tools)
        for chunk in approvals:
            step.emit(chunk)
        step.finish_step()
        rest = await writer.drain()
        metrics.STEP_DURATION.labels(turn.agent).observe(time.monotonic() - started)
    except asyncio.CancelledError:
        details = activity.cancellation_details()
        if cancel.requested:
            # The turn was cancelled (`POST …/cancel`, through Postgres): keep what the
            # model said so far, end the stream with `abort`, and tell the workflow.
            await asyncio.shield(outcomes.store_cancelled(turn.id, builder, step, writer))
            await asyncio.shield(stop_answer(setup, checkpoint))
            return ModelStepResult(ended=True, status="aborted")
        if (
            details is not None
            and details.cancel_requested
            and await asyncio.shield(cancel_noted(res.store, turn.id))
        ):
            # Cancelled by the workflow (its cancel reached it through Temporal): the same.
            # Only a cancel someone asked for counts: a local activity is also cancelled
            # when its workflow task was lost (its worker froze past the task's timeout).
            await asyncio.shield(outcomes.store_cancelled(turn.id, builder, step, writer))
            await asyncio.shield(stop_answer(setup, checkpoint))
        else:
            # Not a cancel: this attempt timed out (a heartbeat arrived late under load),
            # or the worker is shutting down. Another attempt owns the step now; write
            # nothing more (its fence would refuse it anyway).
            await writer.abort()
        raise
    except StaleAttempt:
        await writer.abort()
        raise
    except TimeoutError:
        if not budget.expired():
            raise
        return await outcomes.out_of_time(agent, turn, step, fence, setup.time_budget or 0)
    except ModelError as exc:
        if checkpoint is not None:
            # The answer failed where it runs, or cannot be read: the next attempt asks anew.
            with contextlib.suppress(StaleAttempt):
                await record_checkpoint(res, turn.id, fence, None)
        await observe.request_failed(turn, index, fence.attempt, exc)
        if isinstance(exc, StreamStalled):
            await observe.stalled(turn, index, exc.seconds)
        # Context overflow: compacts and retries the step (raises), or ends the turn.
        overflow = await compactions.on_overflow(agent, turn, step, fence, exc)
        if overflow is not None:
            return await outcomes.fail(
                agent, turn, "model", overflow, fence, step, classification="context_overflow"
            )
        if not exc.retryable:
            return await outcomes.fail(agent, turn, "model", exc, fence, step)
        return await outcomes.recover(agent, turn, step, fence, exc, setup)
    except Exception as exc:
        # Neither the model's failure nor a cancel: an adapter that cannot read what the
        # server streamed (a pydantic `ValidationError`), a write Postgres refuses. Retried
        # while it may pass; then the turn ends `error`, keeping what the model said.
        if not gives_up(exc):
            raise
        return await outcomes.fail(agent, turn, "model", exc, fence, step)
    return Streamed(finish, calls, approvals, rest)


async def record_checkpoint(
    res: ActivityResources, turn_id: str, fence: Fence, resume: dict[str, Any] | None
) -> None:
    """Keep (or, None, forget) where this step's answer can be picked up again, for the
    attempt that replaces this one should its worker die."""
    await fence.held()
    async with res.store.db.connection() as conn:
        await set_checkpoint(conn, turn_id, fence, resume)


async def stop_answer(setup: StepSetup, checkpoint: dict[str, Any] | None) -> None:
    """A cancelled turn's answer, stopped where the provider runs it on its own (background
    mode), so that it does not go on generating, and billing, for nobody."""
    cancel = getattr(answering(setup.model), "cancel", None)
    if checkpoint is None or cancel is None:
        return
    try:
        async with asyncio.timeout(10):
            await cancel(checkpoint)
    except Exception:
        log.warning("could not stop the model's answer %s", checkpoint, exc_info=True)


@dataclass
class EarlyStep:
    """A turn's first step as far as it goes before the turn's workflow runs: made by the
    worker that starts the workflow, beside the start (`EarlySteps`), and taken on by the
    step's first attempt. What the turn's start stored, its transcript, and the request, sent.
    Nothing is written: the step's fence is claimed by the attempt that takes it."""

    turn: TurnRecord
    agent: Think
    transcript: list[UIMessage]
    prepared: PreparedStep
    cancels: CancelSubscription
    """The turn's subscription to cancels, opened before its read: one announced since is
    seen by the step's stream."""
    claim: Awaitable[FirstClaim] | None = None
    """The step's claim of its fence, sent as the eager start returned (`EarlySteps.started`):
    the attempt that takes this on is attempt 1, the one that workflow task runs."""

    async def close(self) -> None:
        """Give it up: the model's answer on its way is cut off."""
        self.cancels.close()
        await close_events(self.prepared.events)
