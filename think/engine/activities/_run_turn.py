"""The activities of `think.RunTurn`: a turn run for a user's own workflow code
(`think.workflow.run_turn`).

Three short database steps, local to the `think.RunTurn` workflow's task, around a wait that
holds no worker slot: `run_turn_admit` admits the turn through the one front door (the same
idempotency, queue and `message_concurrency` as HTTP's), naming the `think.RunTurn` workflow
as the one to tell when the turn ends; `run_turn_result` reads how the turn stands;
`run_turn_cancel` cancels it as `POST …/cancel` does, when the caller is cancelled.
docs/architecture.md, "Turns in your own workflows", has the picture.
"""

from __future__ import annotations

import logging
from typing import Any, cast

from temporalio import activity
from temporalio.exceptions import ApplicationError

from think._messages import ID
from think.agent import answer_text, input_json, messages_of
from think.engine.activities._resources import ActivityResources
from think.exceptions import NON_RETRYABLE_USER_ERROR, UserError
from think.storage import MessageConcurrency, TurnRecord
from think.turns import admit_submission, cancel_turn, resolve_concurrency, turn_view
from think.workflows.inputs import RunTurnInput, RunTurnOutcome, RunTurnRef
from think.workflows.names import (
    RUN_TURN_ADMIT_ACTIVITY,
    RUN_TURN_CANCEL_ACTIVITY,
    RUN_TURN_RESULT_ACTIVITY,
)

log = logging.getLogger("think.engine.activities")


def outcome_of(turn: TurnRecord, *, accepted: bool = True) -> RunTurnOutcome:
    """The turn as `think.RunTurn` answers it (from the turn view every door shows)."""
    view = turn_view(turn, accepted=accepted)
    message = view.message if view.message and view.message.get("parts") else None
    return RunTurnOutcome(
        turn_id=view.turn_id,
        stored_id=turn.id,
        status=view.status,
        done=turn.terminal,
        message=message,
        text=answer_text(message),
        output=view.output,
        error=view.error,
        answered_by=view.answered_by,
        usage=view.usage.model_dump(mode="json"),
        accepted=accepted,
    )


class RunTurnActivities:
    """The activities of `think.RunTurn`, sharing the worker's `ActivityResources`."""

    def __init__(self, res: ActivityResources) -> None:
        self.res = res

    def activities(self) -> list[Any]:
        return [self.admit, self.result, self.cancel]

    @activity.defn(name=RUN_TURN_ADMIT_ACTIVITY)
    async def admit(self, inp: RunTurnInput) -> RunTurnOutcome:
        """Admit the turn (or find the one its key admitted before: a retried or replayed
        call submits nothing twice). A request that can never be admitted (an unknown agent,
        a bad id or input, the key reused with another request) fails at once, naming why."""
        res = self.res
        assert res.temporal is not None, "the worker gives its activities a Temporal client"
        try:
            agent = res.registry.get(inp.agent)
            if not ID.fullmatch(inp.conversation_id):
                raise UserError(f"conversation id {inp.conversation_id!r} is not a valid id")
            resolve_concurrency(agent, inp.concurrency)  # a mode that is not one: UserError
            concurrency = cast(MessageConcurrency | None, inp.concurrency)
            messages = messages_of(inp.input)
            admission = await admit_submission(
                res.store,
                res.temporal,
                res.settings.task_queue,
                agent,
                tenant=inp.tenant,
                conversation_id=inp.conversation_id,
                messages=messages,
                input=input_json(inp.input, messages),
                body=inp.body,
                concurrency=concurrency,
                idempotency_key=inp.idempotency_key,
                awaited=True,
                output=inp.output_schema,
                notify_workflow=activity.info().workflow_id,
            )
        except UserError as exc:
            raise ApplicationError(
                f"run_turn({inp.agent!r}, {inp.conversation_id!r}) from workflow "
                f"{inp.caller!r} was not admitted: {exc}",
                type=NON_RETRYABLE_USER_ERROR,
                non_retryable=True,
            ) from exc
        turn = admission.turn
        if admission.accepted:
            log.info(
                "workflow %s: turn %s of %s/%s admitted",
                inp.caller,
                turn.id,
                inp.agent,
                inp.conversation_id,
            )
        return outcome_of(turn, accepted=admission.accepted)

    @activity.defn(name=RUN_TURN_RESULT_ACTIVITY)
    async def result(self, ref: RunTurnRef) -> RunTurnOutcome:
        """How the turn stands (`done` once it has ended)."""
        turn = await self.res.store.get_turn(ref.stored_turn_id)
        if turn is None:
            return RunTurnOutcome(
                turn_id=ref.stored_turn_id,
                stored_id=ref.stored_turn_id,
                status="error",
                done=True,
                error=f"turn {ref.stored_turn_id} no longer exists (its conversation deleted?)",
            )
        return outcome_of(turn)

    @activity.defn(name=RUN_TURN_CANCEL_ACTIVITY)
    async def cancel(self, ref: RunTurnRef) -> None:
        """Cancel the turn as `POST …/cancel` does (its partial answer kept); a turn that has
        ended is left as it is."""
        res = self.res
        assert res.temporal is not None
        turn = await res.store.get_turn(ref.stored_turn_id)
        if turn is not None and not turn.terminal:
            await cancel_turn(res.store, res.temporal, res.settings.task_queue, turn, ref.reason)
