"""A model step found lost to a crash: an earlier attempt began the step, streamed some of it,
and never finished, nor failed the way a model does (its worker died, was evicted or
redeployed; Postgres went away under it). The attempt that replaces it runs this before it
asks the model anything.

What the lost attempt streamed is in the stream log, after the step's last `start-step` (or
`reset-step`): exactly what clients hold of the step. It is rebuilt onto the stored draft and
shown to `on_chat_recovery` (`kind="crash"`), whose default is the spec's: keep it, closed, as
a finished step, and continue from it in a new step, so that the words are neither paid for
twice nor taken back from the user. `{"persist": False}` asks again from scratch as before
(`reset-step`); `{"continue": False}` ends the turn now. A turn whose recoveries stop making
progress ends through `on_exhausted` instead of looping.

Only an attempt that found its step open behind an earlier attempt of it runs this; a step
that nothing happened to reads and writes nothing more than it did.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Any

from temporalio.exceptions import ApplicationError

from think._messages import UIMessage
from think._protocol import DataChunk, UIMessageChunk
from think.agent import Think
from think.engine.activities import _observe as observe
from think.engine.activities._assembly import HookFailed, StepSetup
from think.engine.activities._errors import chat_error_text
from think.engine.activities._model_stream import LoadedStep
from think.engine.activities._recovery import (
    RecoveryHookFailed,
    ask_recovery,
    no_progress,
    recovery_context,
    settle_partial,
    tell_exhausted,
)
from think.engine.activities._resources import ActivityResources
from think.engine.activities._step_outcomes import StepOutcomes, continued
from think.models import ModelRequest
from think.storage import TurnRecord, note_recovery, progress_of
from think.streaming import Fence, MessageBuilder, abandoned_chunks, append, mark_attempt_failed
from think.workflows.inputs import ModelStepResult

log = logging.getLogger("think.engine.activities")

CRASH_CAUSE = "the attempt running this step stopped before it finished (its worker went away)"


Assemble = Callable[
    [TurnRecord, Think, list[UIMessage], MessageBuilder],
    Awaitable[tuple[StepSetup, ModelRequest, str | None]],
]
"""`StepAttempt.assemble`: what a kept first step runs to make the turn's configuration."""


async def recover_crash(
    res: ActivityResources,
    outcomes: StepOutcomes,
    loaded: LoadedStep,
    index: int,
    assemble: Assemble,
) -> ModelStepResult | None:
    """Settle step `index` of a turn found lost to a crash: what the step answers now (kept
    and continued, or the turn ended), or None to ask the model again from scratch (the step
    then resets what clients hold of it, as before). A provider that kept the answer running
    (`loaded.resume`) has it picked up whole unless the hook ends the turn: nothing is asked
    or paid twice then either, and no partial is kept beside it."""
    agent, turn, fence = loaded.agent, loaded.turn, loaded.fence
    async with res.store.db.connection() as conn:
        lost = await abandoned_chunks(conn, turn.id)
    builder = MessageBuilder(turn.message)
    builder.apply({"type": "start-step"})
    for chunk in lost:
        builder.apply(chunk)
    drafted = len(turn.message["parts"]) if turn.message else 0
    has_output = len(builder.parts) > drafted + 1  # more than the step's `step-start`
    async with res.store.db.transaction() as conn:
        note = await note_recovery(
            conn,
            turn.id,
            progress_of(builder.parts),
            mark=f"{fence.key}:recovered-at",
            attempt=fence.attempt,
        )
    failures = turn.fences.get(f"{fence.key}:failures", 0)
    budget = agent.chat_recovery.max_no_progress
    context = recovery_context(
        agent,
        turn,
        index,
        "crash",
        note,
        cause=CRASH_CAUSE,
        parts=builder.parts,
        failures=failures,
    )
    log.warning(
        "turn %s: step %d was lost to a crash (recovery %d of incident %s)",
        turn.id,
        index + 1,
        note.attempt,
        context.incident_id,
    )
    if no_progress(agent, note):
        cause = f"no progress in {note.stuck + 1} recoveries in a row: {CRASH_CAUSE}"
        await tell_exhausted(agent, context)
        return await outcomes.interrupt_with_notice(
            agent, turn, fence, [], index, note.attempt, cause, exhausted=True
        )
    try:
        options = await ask_recovery(agent, context)
    except RecoveryHookFailed as failed:
        settled = settle_partial(builder)
        text = await chat_error_text(agent, turn, "recovery", failed, has_output)
        return await outcomes.end_error(agent, turn, builder.message, settled, text, fence)
    keep = has_output and options.keeps("crash") and loaded.resume is None
    if not options.continue_:
        cause = f"on_chat_recovery ended the turn after: {CRASH_CAUSE}"
        if keep:
            ending: list[UIMessageChunk] = [*settle_partial(builder), {"type": "finish-step"}]
            builder.apply({"type": "finish-step"})
            return await outcomes.end_interrupted(
                agent, turn, fence, builder.message, ending, cause
            )
        return await outcomes.interrupt_with_notice(
            agent, turn, fence, [], index, note.attempt, cause, exhausted=False
        )
    recovering: DataChunk = {
        "type": "data-recovering",
        "data": {
            "attempt": note.attempt,
            "kind": "crash",
            "incident_id": context.incident_id,
            "cause": CRASH_CAUSE,
        },
        "transient": True,
    }
    if not keep:
        # Asked again: the step resets what clients hold of it, then streams anew.
        async with res.store.db.connection() as conn:
            await append(conn, turn.id, [recovering], fence)
        await observe.recovery(turn, index, note.attempt - 1, budget, CRASH_CAUSE, exhausted=False)
        return None
    # Keep what the lost attempt streamed as a finished step; the next step continues from it.
    config: dict[str, Any] = {}
    if index == 0 and turn.config is None:
        # The turn's configuration (`before_turn`'s, the MCP record) is made by its first
        # step and stored when the step is: the lost attempt's never was, and the next step
        # would not make it. Made here, as the first step would have.
        try:
            setup, _, _ = await assemble(
                turn, agent, loaded.transcript, MessageBuilder(turn.message)
            )
        except HookFailed as exc:
            return await outcomes.fail(agent, turn, exc.stage, exc.cause, fence)
        if setup.new_config:
            config["config"] = None if setup.config is None else setup.config.as_json()
    closing: list[UIMessageChunk] = [*settle_partial(builder), {"type": "finish-step"}]
    builder.apply({"type": "finish-step"})
    async with res.store.db.transaction() as conn:
        await append(
            conn,
            turn.id,
            [*closing, recovering],
            fence,
            message=builder.message,
            steps_done=index + 1,
            **config,
        )
    await observe.recovery(turn, index, note.attempt - 1, budget, CRASH_CAUSE, exhausted=False)
    return continued(agent, turn)


MARK_TIMEOUT = 2.0
"""How long a failing attempt tries to mark itself failed: Postgres may be what failed."""


async def mark_failed(
    res: ActivityResources, turn_id: str, fence: Fence | None, exc: BaseException
) -> None:
    """Mark this attempt as one that failed (an exception it raised, to be retried), not one
    cut off: the attempt that retries it then asks again as before rather than recover it as
    a crash. Best effort: when Postgres is what failed, the mark is not written, and the
    retry recovers the step as a crash (it was lost to the outage). A model failure's retry
    (`StepOutcomes.recover`) is marked already."""
    mark_failed_here(turn_id, fence, exc)
    if fence is None or fence.pending or isinstance(exc, ApplicationError):
        return
    try:
        async with asyncio.timeout(MARK_TIMEOUT), res.store.db.connection() as conn:
            await mark_attempt_failed(conn, turn_id, fence)
    except Exception:
        log.debug("turn %s: could not mark attempt %d failed", turn_id, fence.attempt)


ENDED_HERE_LIMIT = 10_000
_ended_here: OrderedDict[str, int] = OrderedDict()
"""Attempts this process saw end (`<turn>/<fence key>` → attempt) in a failure or a
cancellation: what a retry on the same worker reads when Postgres could not take the mark
(the outage is what failed). Bounded, oldest out first; a restart forgets it, and a retry
elsewhere after such an outage recovers the step as a crash (it was lost, after all)."""


def mark_failed_here(turn_id: str, fence: Fence | None, exc: BaseException) -> None:
    """Remember in this process that the fenced attempt ended (`exc`), not cut off."""
    if fence is None or isinstance(exc, ApplicationError):
        return
    _ended_here[f"{turn_id}/{fence.key}"] = fence.attempt
    _ended_here.move_to_end(f"{turn_id}/{fence.key}")
    while len(_ended_here) > ENDED_HERE_LIMIT:
        _ended_here.popitem(last=False)


def lost_to_crash(turn: TurnRecord, fence: Fence) -> bool:
    """Whether the attempt before `fence`'s, which left its step open, was cut off (its worker
    died: a crash, an eviction, a deploy) rather than ended in a failure: a model failure
    `StepOutcomes.recover` marked, an exception `mark_failed` marked, or one this process saw
    (`mark_failed_here`). Read from what the step's load read already: no I/O."""
    before = fence.attempt - 1
    if turn.fences.get(f"{fence.key}:failed-at") == before:
        return False
    return _ended_here.get(f"{turn.id}/{fence.key}") != before
