"""One turn: prepare, then model steps and tool calls until the model stops, then commit.

Workflow code only sequences activities; all I/O and all user code (model, tools, hooks) run
inside activities. Results passed between them are ids and small values: the transcript and
the growing assistant message live in Postgres.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from think.workflows._inputs import (
        CommitInput,
        CommitResult,
        ModelStepInput,
        ModelStepResult,
        PrepareResult,
        ToolCallInput,
        ToolCallResult,
        TurnInput,
    )
    from think.workflows._names import (
        COMMIT_ACTIVITY,
        MODEL_STEP_ACTIVITY,
        PREPARE_ACTIVITY,
        TOOL_CALL_ACTIVITY,
        TURN_STATUS_KEY,
        TURN_WORKFLOW,
    )

DB_RETRY = RetryPolicy(
    initial_interval=timedelta(milliseconds=200), maximum_interval=timedelta(seconds=5)
)
MODEL_RETRY = RetryPolicy(
    initial_interval=timedelta(milliseconds=500),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=10),
    maximum_attempts=5,
)
MODEL_HEARTBEAT = timedelta(seconds=5)


@workflow.defn(name=TURN_WORKFLOW)
class TurnWorkflow:
    @workflow.run
    async def run(self, inp: TurnInput) -> CommitResult:
        turn_id = inp.turn_id
        self._status("running")
        # Prepare and commit are short database transactions: as local activities they run in
        # the same workflow task as the step around them, saving a server round trip each.
        prep: PrepareResult = await workflow.execute_local_activity(
            PREPARE_ACTIVITY,
            inp,
            result_type=PrepareResult,
            start_to_close_timeout=timedelta(seconds=30),
            retry_policy=DB_RETRY,
            summary="load the conversation, append the user message",
        )
        if not prep.run:
            return CommitResult(status="skipped")
        status: CommitInput = CommitInput(turn_id=turn_id, status="completed")
        try:
            for step in range(prep.steps_done, prep.max_steps):
                workflow.set_current_details(f"step {step + 1}: waiting for {prep.model}")
                result: ModelStepResult = await workflow.execute_activity(
                    MODEL_STEP_ACTIVITY,
                    ModelStepInput(turn_id=turn_id, step=step),
                    result_type=ModelStepResult,
                    start_to_close_timeout=timedelta(minutes=10),
                    heartbeat_timeout=MODEL_HEARTBEAT,
                    retry_policy=MODEL_RETRY,
                    summary=f"model step {step + 1} ({prep.model})",
                )
                status.finish_reason = result.finish_reason
                if not result.called_tools:
                    break
                names = ", ".join(c.tool_name for c in result.tool_calls) or "nothing"
                workflow.set_current_details(f"step {step + 1}: running {names}")
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
        except ActivityError as exc:
            status = CommitInput(turn_id=turn_id, status="error", error=_message(exc))
        workflow.set_current_details(f"recording the turn as {status.status}")
        committed: CommitResult = await workflow.execute_local_activity(
            COMMIT_ACTIVITY,
            status,
            result_type=CommitResult,
            start_to_close_timeout=timedelta(seconds=30),
            retry_policy=DB_RETRY,
            summary=f"store the assistant message ({status.status})",
        )
        self._status(committed.status)
        workflow.set_current_details(f"{committed.status}")
        return committed

    def _status(self, status: str) -> None:
        workflow.upsert_search_attributes([TURN_STATUS_KEY.value_set(status)])


def _message(exc: ActivityError) -> str:
    cause = exc.cause
    if isinstance(cause, ApplicationError):
        return cause.message
    return str(cause or exc)
