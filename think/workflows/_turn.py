"""One turn: model steps and tool calls until the model answers without tools.

Workflow code only sequences activities; all I/O and all user code (model, tools, hooks) run
inside activities. Results passed between them are ids and small values: the transcript and
the growing assistant message live in Postgres.

A plain turn is one activity: the first model step also starts the turn (appends the user's
message) and the step that answers without tools also ends it (stores the message), each in
the transaction that records the step. Every separate activity would cost a workflow-task
round trip, and this is the hot path of every turn.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError, CancelledError
from temporalio.workflow import ActivityCancellationType

with workflow.unsafe.imports_passed_through():
    from think.workflows._inputs import (
        CommitInput,
        CommitResult,
        ModelStepInput,
        ModelStepResult,
        ToolCallInput,
        ToolCallResult,
        TurnInput,
    )
    from think.workflows._names import (
        COMMIT_ACTIVITY,
        MODEL_STEP_ACTIVITY,
        TOOL_CALL_ACTIVITY,
        TURN_STATUS_KEY,
        TURN_WORKFLOW,
    )

DB_RETRY = RetryPolicy(
    initial_interval=timedelta(milliseconds=200), maximum_interval=timedelta(seconds=5)
)
# The step itself bounds model failures (the agent's `chat_recovery`, ending the turn as
# `interrupted`); what reaches this policy beyond that are infrastructure failures (Postgres or
# a worker down), which are retried until they recover.
MODEL_RETRY = RetryPolicy(
    initial_interval=timedelta(milliseconds=500),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=10),
)
MODEL_HEARTBEAT = timedelta(seconds=5)


@workflow.defn(name=TURN_WORKFLOW)
class TurnWorkflow:
    @workflow.run
    async def run(self, inp: TurnInput) -> CommitResult:
        turn_id = inp.turn_id  # started with ThinkTurnStatus=running by the conversation
        outcome = CommitInput(turn_id=turn_id, status="completed", finish_reason="tool-calls")
        step = 0
        try:
            while True:
                workflow.set_current_details(f"step {step + 1}: waiting for the model")
                result: ModelStepResult = await workflow.execute_activity(
                    MODEL_STEP_ACTIVITY,
                    ModelStepInput(turn_id=turn_id, step=step),
                    result_type=ModelStepResult,
                    start_to_close_timeout=timedelta(minutes=10),
                    heartbeat_timeout=MODEL_HEARTBEAT,
                    retry_policy=MODEL_RETRY,
                    # On cancel, wait for the step to store its partial answer and `abort`.
                    cancellation_type=ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
                    summary=f"model step {step + 1}",
                )
                if result.ended:
                    return self._ended(result.status)
                names = ", ".join(c.tool_name for c in result.tool_calls) or "nothing"
                workflow.set_current_details(f"step {step + 1} ({result.model}): running {names}")
                await asyncio.gather(
                    *(
                        workflow.execute_activity(
                            TOOL_CALL_ACTIVITY,
                            ToolCallInput(
                                turn_id=turn_id,
                                step=step,
                                tool_call_id=call.tool_call_id,
                                tool_name=call.tool_name,
                            ),
                            result_type=ToolCallResult,
                            start_to_close_timeout=timedelta(minutes=5),
                            heartbeat_timeout=timedelta(seconds=30),
                            retry_policy=DB_RETRY,
                            summary=f"tool {call.tool_name}",
                        )
                        for call in result.tool_calls
                    )
                )
                step += 1
                if step >= result.max_steps:
                    break  # the step budget is spent: end with what the tools returned
        except ActivityError as exc:
            if isinstance(exc.cause, CancelledError):
                outcome = CommitInput(turn_id=turn_id, status="aborted", error="cancelled")
            else:
                outcome = CommitInput(turn_id=turn_id, status="error", error=_message(exc))
        except asyncio.CancelledError:
            # Cancelled (POST …/cancel): record `aborted` unless the step already did.
            outcome = CommitInput(turn_id=turn_id, status="aborted", error="cancelled")
        workflow.set_current_details(f"recording the turn as {outcome.status}")
        # A short database transaction: as a local activity it runs in this workflow task.
        committed: CommitResult = await workflow.execute_local_activity(
            COMMIT_ACTIVITY,
            outcome,
            result_type=CommitResult,
            start_to_close_timeout=timedelta(seconds=30),
            retry_policy=DB_RETRY,
            summary=f"store the assistant message ({outcome.status})",
        )
        return self._ended(committed.status)

    def _ended(self, status: str) -> CommitResult:
        self._status(status)
        workflow.set_current_details(status)
        return CommitResult(status=status)

    def _status(self, status: str) -> None:
        workflow.upsert_search_attributes([TURN_STATUS_KEY.value_set(status)])


def _message(exc: ActivityError) -> str:
    cause = exc.cause
    if isinstance(cause, ApplicationError):
        return cause.message
    return str(cause or exc)
