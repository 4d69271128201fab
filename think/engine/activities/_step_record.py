"""A model step's `record` phase (`_model_step.py` has the others): the step is stored, in
one statement when it called tools, else in the transaction that ends the turn."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from pydantic_core import to_jsonable_python

from think import metrics
from think.agent import step_usage
from think.engine.activities import _observe as observe
from think.engine.activities._assembly import StepSetup, overrides
from think.engine.activities._compaction import Compactions
from think.engine.activities._model_stream import LoadedStep, Streamed
from think.engine.activities._resources import ActivityResources
from think.engine.activities._step_outcomes import StepOutcomes
from think.engine.activities._step_stream import StepStream
from think.engine.activities._tool_plan import client_tool_names, paused_status
from think.engine.activities._turn_state import end_turn
from think.exceptions import OutputValidationError
from think.models import answering, validate_output
from think.storage import TurnUsage, is_transient, pending_steering
from think.streaming import TurnEnded, append
from think.workflows.inputs import ModelStepResult

log = logging.getLogger("think.engine.activities")

T = TypeVar("T")

RECORD_PAUSES = (0.25, 0.5, 1.0, 2.0, 4.0)
"""Seconds between tries of an answer's record that failed transiently (Postgres restarting
or unreachable, a deadlock, a serialization conflict): about 8 s in all, what a Postgres
restart takes. Tried again within the attempt that holds the answer rather than left to the
attempt that would replace it, which finds the answer streamed but not recorded and so keeps
it and asks the model to continue (or asks again): a second model call, and words after an
answer that was whole."""


async def stored_through_outages(store: Callable[[], Awaitable[T]]) -> T:
    """`store()`, tried again after each of `RECORD_PAUSES` while it fails transiently. It
    must be safe to run again after a try whose commit went through unacknowledged."""
    for pause in RECORD_PAUSES:
        try:
            return await store()
        except Exception as exc:
            if not is_transient(exc):
                raise
            log.warning(
                "storing a step's answer failed (%s); trying again in %.2f s",
                type(exc).__name__,
                pause,
            )
        await asyncio.sleep(pause)
    return await store()


async def record_step(
    res: ActivityResources,
    outcomes: StepOutcomes,
    compactions: Compactions,
    index: int,
    loaded: LoadedStep,
    setup: StepSetup,
    step: StepStream,
    streamed: Streamed,
) -> ModelStepResult:
    """Store the step `index`: in one statement when it called tools, else in the transaction
    that ends the turn (or, when someone steered it meanwhile, goes on to another step)."""
    agent, turn, fence, store = loaded.agent, loaded.turn, loaded.fence, res.store
    builder, finish = step.builder, streamed.finish
    this_step = step_usage(setup.model, finish)
    # A step recorded again (a retried record) replaces itself: the totals are the steps'.
    usage = TurnUsage.of_steps(
        [*TurnUsage.from_record(turn.usage).steps[:index], this_step]
    ).record()
    ended = not step.called_tools
    config: dict[str, Any] = {}
    if setup.new_config:
        config["config"] = None if setup.config is None else setup.config.as_json()
    if ended and setup.output is not None:
        try:
            value = validate_output(setup.output, step.partial_text)
        except OutputValidationError as exc:
            return await outcomes.fail(agent, turn, "output", exc, fence, step, streamed.rest)
        config["output"] = to_jsonable_python(value)
    if ended:

        async def end_or_go_on() -> ModelStepResult | bool:
            """The turn ended (or as a cancel left it: a `ModelStepResult`), or steered into
            another step (False)."""
            # The answer becomes the cached path's new tail inside the transaction that stores
            # it: a caller woken by the commit may submit the next turn to this worker before
            # this task runs again. Should the transaction fail, the path is forgotten, since
            # a retry may store other words under the same message id.
            with res.paths.forgotten_on_error(turn.conversation_uid):
                async with store.db.transaction() as conn:
                    current, queue = await store.lock_queue_turn(conn, turn.id)
                    if current.terminal:
                        # Cancelled while we were streaming (or an earlier try of this record
                        # committed, its acknowledgement lost): that outcome stands.
                        return ModelStepResult(ended=True, status=current.status)
                    if current.steps_done > index:
                        return False  # an earlier try recorded the step, steered on
                    # A user steered the turn while this step spoke: it takes another step
                    # for them rather than end (under the turn's lock, which a steer takes
                    # too: one that comes after this finds the turn ended).
                    ends = index + 1 >= setup.max_steps or not pending_steering(
                        current, builder.message
                    )
                    if not ends:
                        await append(
                            conn,
                            turn.id,
                            streamed.rest,
                            fence,
                            message=builder.message,
                            steps_done=index + 1,
                            usage=usage,
                            **config,
                        )
                    else:
                        answer = await end_turn(
                            store,
                            conn,
                            turn,
                            queue,
                            status="completed",
                            message=builder.message,
                            chunks=streamed.rest,
                            fence=fence,
                            finish_reason=finish.finish_reason,
                            steps_done=index + 1,
                            usage=usage,
                            **config,
                        )
                        # The next turn's first step finds its path here.
                        res.paths.extend(turn.conversation_uid, current.messages_revision, answer)
                    return ends

        outcome = await stored_through_outages(end_or_go_on)
        if isinstance(outcome, ModelStepResult):
            return outcome
        ended = outcome
    else:
        clients = client_tool_names(turn)
        status = paused_status(builder.message, clients, setup.tools)
        try:
            # One statement, no lock taken first: nothing but a cancel writes the turn
            # while its step streams, and `while_open` refuses the write if one ended it.
            async with store.db.connection() as conn:
                await append(
                    conn,
                    turn.id,
                    streamed.rest,
                    fence,
                    while_open=True,
                    message=builder.message,
                    steps_done=index + 1,
                    usage=usage,
                    status=status,
                    **config,
                )
        except TurnEnded:
            ended_as = await store.get_turn(turn.id)
            assert ended_as is not None  # turns are never deleted while they run
            return ModelStepResult(ended=True, status=ended_as.status)
    done = turn.model_copy(update={"usage": usage, "message": builder.message})
    metrics.count_model_usage(turn.agent, this_step)
    if ended:
        await outcomes.step_finished(agent, done, index)
        await observe.finished(done, "completed", finish_reason=finish.finish_reason)
    for chunk in streamed.approvals:
        name = next(c.tool_name for c in streamed.calls if c.tool_call_id == chunk["toolCallId"])
        await observe.approval_requested(turn, chunk, name)
    return ModelStepResult(
        ended=ended,
        status="completed" if ended else "running",
        max_steps=setup.max_steps,
        model=answering(setup.model).name,
        tool_calls=streamed.calls,
        called_tools=step.called_tools,
        finish_reason=finish.finish_reason,
        input_tokens=finish.usage.input_tokens,
        output_tokens=finish.usage.output_tokens,
        respond=ended and overrides(agent, "on_chat_response"),
        compact=ended and compactions.compacts_after_turns(agent),
    )
