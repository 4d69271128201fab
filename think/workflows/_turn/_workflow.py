"""`TurnWorkflow`: the step loop (model steps and their tool calls until the model answers
without tools, or the step budget is spent), one tool call, and how the turn ends, recorded
and told. What it pauses for is in `_approvals_and_client_tools`, what it shows while it waits
in `_progress`, its sub-agents in `_sub_agents`."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError, CancelledError
from temporalio.workflow import ActivityCancellationType

with workflow.unsafe.imports_passed_through():
    from think.exceptions import STALE_ATTEMPT, Superseded
    from think.workflows.inputs import (
        CommitInput,
        CommitResult,
        ModelStepInput,
        ModelStepResult,
        QuietInput,
        QuietResult,
        ToolCallInput,
        ToolCallRef,
        ToolCallResult,
        ToolDecision,
        ToolResultSubmission,
        TurnEnded,
        TurnInput,
    )
    from think.workflows.names import (
        COMMIT_ACTIVITY,
        MODEL_STEP_ACTIVITY,
        QUIET_ACTIVITY,
        TOOL_CALL_ACTIVITY,
        TURN_ENDED,
        TURN_WORKFLOW,
    )

from think.workflows._turn._activities import DB_RETRY, MODEL_RETRY, STEP_TIMEOUT, database_step
from think.workflows._turn._after_turn import start_after_turn
from think.workflows._turn._approvals_and_client_tools import TurnAnswers
from think.workflows._turn._sub_agents import SubAgentCalls
from think.workflows._turn._webhooks import pausing, start_webhooks


@workflow.defn(name=TURN_WORKFLOW)
class TurnWorkflow(TurnAnswers, SubAgentCalls):
    @workflow.run
    async def run(self, inp: TurnInput) -> CommitResult:
        turn_id = inp.turn_id  # started with ThinkTurnStatus=running (think.turns._dispatch)
        outcome = CommitInput(turn_id=turn_id, status="completed", finish_reason="tool-calls")
        step = 0
        try:
            if inp.debounce_seconds > 0:
                await self._quiet(inp)
            while True:
                self._step, self._planning = step, True
                workflow.set_current_details(f"step {step + 1}: waiting for the model")
                result: ModelStepResult = await workflow.execute_local_activity(
                    MODEL_STEP_ACTIVITY,
                    ModelStepInput(turn_id=turn_id, step=step, agent=inp.conversation.agent),
                    result_type=ModelStepResult,
                    start_to_close_timeout=STEP_TIMEOUT,
                    retry_policy=MODEL_RETRY,
                    # On cancel, wait for the step to store its partial answer and `abort`.
                    cancellation_type=ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
                    summary=f"model step {step + 1}",
                )
                self._planning = False
                if result.ended:
                    return await self._ended(
                        inp,
                        result.status,
                        respond=result.respond,
                        compact=result.compact,
                        webhooks=result.webhooks,
                    )
                self._expect(result.tool_calls)
                if result.webhooks and (paused := pausing(result.tool_calls)):
                    await start_webhooks(turn_id, paused)
                self._show_progress(step, result.model)
                await asyncio.gather(*(self._settle(turn_id, step, c) for c in result.tool_calls))
                step += 1
                if step >= result.max_steps:
                    break  # the step budget is spent: end with what the tools returned
        except ActivityError as exc:
            if isinstance(exc.cause, CancelledError):
                _raise_unless_cancelled()
                outcome = CommitInput(turn_id=turn_id, status="aborted", error="cancelled")
            else:
                _raise_if_superseded(exc.cause)
                outcome = CommitInput(turn_id=turn_id, status="error", error=_message(exc))
        except ApplicationError as exc:
            # A local activity's non-retryable failure reaches the workflow as the
            # activity's own error, not wrapped in an ActivityError.
            _raise_if_superseded(exc)
            outcome = CommitInput(turn_id=turn_id, status="error", error=exc.message)
        except asyncio.CancelledError:
            # Cancelled (POST …/cancel): record `aborted` unless the step already did.
            outcome = CommitInput(turn_id=turn_id, status="aborted", error="cancelled")
        if self._children:
            # Ending without their answers: the sub-agents' turns are cancelled too.
            await self._cancel_children(turn_id, outcome.status)
        workflow.set_current_details(f"recording the turn as {outcome.status}")
        # A short database transaction: as a local activity it runs in this workflow task.
        committed = await database_step(
            COMMIT_ACTIVITY,
            outcome.model_copy(update={"agent": inp.conversation.agent}),
            result_type=CommitResult,
            summary=f"store the assistant message ({outcome.status})",
        )
        return await self._ended(
            inp,
            committed.status,
            respond=committed.respond,
            compact=committed.compact,
            webhooks=committed.webhooks,
        )

    async def _quiet(self, inp: TurnInput) -> None:
        """A "debounce" head: wait, on durable timers, until its conversation has had no new
        submission for `debounce_seconds` (what arrives meanwhile is merged when it starts)."""
        while True:
            left = await database_step(
                QUIET_ACTIVITY,
                QuietInput(turn_id=inp.turn_id, seconds=inp.debounce_seconds),
                result_type=QuietResult,
                summary="debounce: how long until quiet",
            )
            if left.seconds <= 0:
                return
            workflow.set_current_details(f"debounce: waiting {left.seconds:.2f} s")
            await workflow.sleep(timedelta(seconds=left.seconds), summary="debounce")

    async def _settle(self, turn_id: str, step: int, call: ToolCallRef) -> None:
        """Run one call to its recorded outcome, pausing first for a person or the client."""
        if call.kind == "agent":
            # An agent tool that asked for approval waits for it like any tool, then starts
            # its child (or records the denial) with the decision.
            approval = await self._decision(call, call.approval_id) if call.approval_id else None
            await self._delegate(turn_id, step, call, approval)
            self._show_progress(step, "")
            return
        decision: ToolDecision | None = None
        client_result: ToolResultSubmission | None = None
        if call.kind == "approval" and call.approval_id:
            decision = await self._decision(call, call.approval_id)
        elif call.kind == "client":
            client_result = await self._client_result(call)
        tool_input = ToolCallInput(
            turn_id=turn_id,
            step=step,
            tool_call_id=call.tool_call_id,
            tool_name=call.tool_name,
            decision=decision,
            client_result=client_result,
        )
        result = await self._tool_activity(call, tool_input)
        while result.awaiting is not None and (approval_id := result.awaiting.approval_id):
            # Code mode: a call of the program waits for a person. Ask, as for a model's call;
            # then the program runs again with the decision, from its record.
            waiting = result.awaiting
            self._approvals.calls[approval_id] = waiting
            self._show_progress(step, "")
            inner = await self._decision(waiting, approval_id)
            decisions = [*tool_input.inner_decisions, inner]
            tool_input = tool_input.model_copy(update={"inner_decisions": decisions})
            result = await self._tool_activity(call, tool_input)
        self._show_progress(step, "")

    async def _tool_activity(self, call: ToolCallRef, tool_input: ToolCallInput) -> ToolCallResult:
        run = call.run
        self._executing += 1
        try:
            if run.local or call.kind == "client":
                # In this workflow task: a marker in the history, no round trip through the server.
                done: ToolCallResult = await workflow.execute_local_activity(
                    TOOL_CALL_ACTIVITY,
                    tool_input,
                    result_type=ToolCallResult,
                    start_to_close_timeout=timedelta(seconds=run.timeout_seconds),
                    retry_policy=DB_RETRY,
                    summary=f"tool {call.tool_name}",
                )
                return done
            # A tool that asked for a heartbeat timeout: its own activity, watched by it.
            done = await workflow.execute_activity(
                TOOL_CALL_ACTIVITY,
                tool_input,
                result_type=ToolCallResult,
                start_to_close_timeout=timedelta(seconds=run.timeout_seconds),
                heartbeat_timeout=timedelta(seconds=run.heartbeat_seconds),
                retry_policy=DB_RETRY,
                summary=f"tool {call.tool_name}",
            )
            return done
        finally:
            self._executing -= 1

    async def _ended(
        self,
        inp: TurnInput,
        status: str,
        *,
        respond: bool,
        compact: bool = False,
        webhooks: bool = False,
    ) -> CommitResult:
        self._status(status)
        workflow.set_current_details(status)
        if webhooks:
            await start_webhooks(inp.turn_id)
        if inp.parent is not None:
            await self._tell_parent(inp, status)
        if inp.notify_workflow is not None:
            await _tell_run_turn(inp.notify_workflow, inp.turn_id, status)
        await start_after_turn(inp, respond=respond, compact=compact)
        return CommitResult(status=status)


async def _tell_run_turn(workflow_id: str, turn_id: str, status: str) -> None:
    """The turn has ended: the `think.RunTurn` workflow that admitted it for a user's workflow
    answers now (it also looks now and then, so a lost Signal only delays it)."""
    caller = workflow.get_external_workflow_handle(workflow_id)
    try:
        await caller.signal(TURN_ENDED, TurnEnded(turn_id=turn_id, status=status))
    except Exception as exc:
        # It has ended meanwhile (its caller cancelled it, say): nobody waits for this.
        workflow.logger.info("run_turn %s of turn %s: %s", workflow_id, turn_id, exc)


def _raise_if_superseded(cause: BaseException | None) -> None:
    """A step refused as a superseded attempt (its worker froze past the task's timeout and
    a newer attempt took its fence): this task must not go on to record anything."""
    if isinstance(cause, ApplicationError) and cause.type == STALE_ATTEMPT:
        raise Superseded(cause.message)


def _raise_unless_cancelled() -> None:
    """A step ended as cancelled, but nobody cancelled this workflow: its worker cancelled the
    local activity because this task was lost (the worker froze past the task's timeout, or is
    shutting down). The turn goes on elsewhere; this task must record nothing, least of all
    `aborted` (a local activity it started would run against Postgres at once)."""
    task = asyncio.current_task()
    # A cancel of the workflow (POST …/cancel, or "Request cancellation" in the Temporal UI)
    # cancels this, its main task, first: deterministic, as it comes from the history.
    if task is None or task.cancelling() == 0:
        raise Superseded("a step was cancelled by its worker, not by a cancel of the turn")


def _message(exc: ActivityError) -> str:
    cause = exc.cause
    if isinstance(cause, ApplicationError):
        return cause.message
    return str(cause or exc)
