"""`RunTurnWorkflow` (`think.RunTurn`): one Think turn for a user's own workflow code, run as
that workflow's child (`think.workflow.run_turn` starts it).

It admits the turn through the one front door (a local activity: the same idempotency,
queue and `message_concurrency` as every other door), then waits for the turn's own
workflow to end, holding no worker slot: the turn signals it (`turn_ended`), and it looks in
Postgres now and then in case no Signal comes (a queued turn cancelled before it ever
started has no workflow to send one). Cancelled, it cancels the turn as `POST …/cancel`
does, waits for the turn to end (its partial answer stored), and ends cancelled itself.
Why a child of its own rather than the turn's workflow as the child: docs/architecture.md,
"Turns in your own workflows".
"""

from __future__ import annotations

import asyncio
import contextlib
from datetime import timedelta
from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from think.workflows.inputs import RunTurnInput, RunTurnOutcome, RunTurnRef
    from think.workflows.names import (
        RUN_TURN_ADMIT_ACTIVITY,
        RUN_TURN_CANCEL_ACTIVITY,
        RUN_TURN_RESULT_ACTIVITY,
        RUN_TURN_WORKFLOW,
        TURN_ENDED,
    )

from think.workflows._turn._activities import database_step

TURN_CHECK = timedelta(seconds=15)
"""How often `think.RunTurn` looks at its turn in Postgres while it waits for the turn's
`turn_ended` Signal, in case none comes."""


@workflow.defn(name=RUN_TURN_WORKFLOW)
class RunTurnWorkflow:
    def __init__(self) -> None:
        self._ended = False

    @workflow.run
    async def run(self, inp: RunTurnInput) -> RunTurnOutcome:
        where = f"{inp.agent}/{inp.conversation_id}"
        admitting = asyncio.ensure_future(
            database_step(
                RUN_TURN_ADMIT_ACTIVITY,
                inp,
                result_type=RunTurnOutcome,
                summary=f"admit a turn of {where}",
            )
        )
        try:
            # Shielded: a cancel that lands during the admission still learns the turn's id,
            # so that the turn it may have admitted is cancelled too, not left running.
            outcome = await asyncio.shield(admitting)
            return await self._until_ended(outcome, where)
        except asyncio.CancelledError:
            outcome = await admitting
            workflow.set_current_details(f"cancelled: cancelling turn {outcome.turn_id}")
            reason = f"cancelled by its caller, workflow {inp.caller}"
            await database_step(
                RUN_TURN_CANCEL_ACTIVITY,
                RunTurnRef(stored_turn_id=outcome.stored_id, reason=reason),
                result_type=type(None),
                summary=f"cancel turn {outcome.turn_id}",
            )
            await self._until_ended(outcome, where)
            raise

    async def _until_ended(self, outcome: RunTurnOutcome, where: str) -> RunTurnOutcome:
        ref = RunTurnRef(stored_turn_id=outcome.stored_id)
        while not outcome.done:
            workflow.set_current_details(f"waiting for turn {outcome.turn_id} of {where}")
            with contextlib.suppress(TimeoutError):
                await workflow.wait_condition(
                    lambda: self._ended,
                    timeout=TURN_CHECK,
                    timeout_summary=f"turn {outcome.turn_id}",
                )
            self._ended = False
            outcome = await database_step(
                RUN_TURN_RESULT_ACTIVITY,
                ref,
                result_type=RunTurnOutcome,
                summary=f"read turn {outcome.turn_id}",
            )
        workflow.set_current_details(f"turn {outcome.turn_id}: {outcome.status}")
        return outcome

    @workflow.signal(name=TURN_ENDED)
    def turn_ended(self, payload: Any) -> None:
        """The turn has ended (sent by its workflow): read its answer now. The payload is
        only informative (`TurnEnded`), so a malformed one changes nothing."""
        self._ended = True
