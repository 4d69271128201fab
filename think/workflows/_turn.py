"""One turn: model steps and tool calls until the model answers without tools.

Workflow code only sequences activities; all I/O and all user code (model, tools, hooks) run
inside activities. Results passed between them are ids and small values: the transcript and
the growing assistant message live in Postgres.

The turn is started directly, once it is its conversation's turn to run (the queue is in
Postgres: `think.turns._dispatch`), and runs its steps as **local activities**: each is a marker in
the history, not a task round trip through the server, so a plain turn is one workflow task
and 7 history events, a tool turn 9. What that costs, and how it is paid for:
- a step's worker dies: the workflow task times out (`TASK_TIMEOUT`, 5 s) and another worker
  replays the turn; every activity is idempotent on Postgres, so the steps that finished
  answer from their record and a finished tool never runs again;
- a cancel: it reaches a streaming step through Postgres (`NOTIFY think_cancel`) at once,
  and the workflow through Temporal's cancel;
- a long step keeps its workflow task open by completing it every 4 s (three events each).

The first model step also starts the turn (appends the user's message) and the step that
answers without tools also ends it (stores the message), each in the transaction that records
the step.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError, CancelledError
from temporalio.workflow import ActivityCancellationType, ParentClosePolicy

with workflow.unsafe.imports_passed_through():
    # pydantic validates a Signal's raw JSON here, so a bad payload is one log line (below).
    from pydantic import ValidationError

    from think.exceptions import STALE_ATTEMPT
    from think.workflows._inputs import (
        AfterTurnInput,
        CommitInput,
        CommitResult,
        ModelStepInput,
        ModelStepResult,
        PendingCall,
        QuietInput,
        QuietResult,
        ToolCallInput,
        ToolCallRef,
        ToolCallResult,
        ToolDecision,
        ToolResultSubmission,
        TurnInput,
        TurnStatusView,
    )
    from think.workflows._names import (
        AFTER_TURN_WORKFLOW,
        ALREADY_ANSWERED,
        ALREADY_DECIDED,
        APPROVE,
        CHAT_RESPONSE_ACTIVITY,
        COMMIT_ACTIVITY,
        COMPACT_ACTIVITY,
        MODEL_STEP_ACTIVITY,
        QUIET_ACTIVITY,
        STATUS_QUERY,
        SUBMIT_TOOL_RESULT,
        TOOL_CALL_ACTIVITY,
        TURN_STATUS_KEY,
        TURN_WORKFLOW,
        UNKNOWN_APPROVAL,
        UNKNOWN_TOOL_CALL,
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
STEP_TIMEOUT = timedelta(minutes=10)
LOCAL_TIMEOUT = timedelta(seconds=30)
COMPACT_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    maximum_interval=timedelta(seconds=30),
    maximum_attempts=5,
)


@workflow.defn(name=TURN_WORKFLOW)
class TurnWorkflow:
    def __init__(self) -> None:
        self._step = 0
        self._planning = True
        """A model step is in flight: approval ids and client calls it creates are not known
        yet, so a decision that names one waits instead of being refused as unknown."""
        self._approvals: dict[str, ToolCallRef] = {}
        self._decisions: dict[str, ToolDecision] = {}
        self._client_calls: dict[str, ToolCallRef] = {}
        self._client_results: dict[str, ToolResultSubmission] = {}
        self._shown_status = "running"

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
                    ModelStepInput(turn_id=turn_id, step=step),
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
                        inp, result.status, respond=result.respond, compact=result.compact
                    )
                for call in result.tool_calls:
                    if call.kind == "approval" and call.approval_id:
                        self._approvals[call.approval_id] = call
                    elif call.kind == "client":
                        self._client_calls[call.tool_call_id] = call
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
        workflow.set_current_details(f"recording the turn as {outcome.status}")
        # A short database transaction: as a local activity it runs in this workflow task.
        committed: CommitResult = await workflow.execute_local_activity(
            COMMIT_ACTIVITY,
            outcome,
            result_type=CommitResult,
            start_to_close_timeout=LOCAL_TIMEOUT,
            retry_policy=DB_RETRY,
            summary=f"store the assistant message ({outcome.status})",
        )
        return await self._ended(
            inp, committed.status, respond=committed.respond, compact=committed.compact
        )

    async def _quiet(self, inp: TurnInput) -> None:
        """A "debounce" head: wait, on durable timers, until its conversation has had no new
        submission for `debounce_seconds` (what arrives meanwhile is merged when it starts)."""
        while True:
            left: QuietResult = await workflow.execute_local_activity(
                QUIET_ACTIVITY,
                QuietInput(turn_id=inp.turn_id, seconds=inp.debounce_seconds),
                result_type=QuietResult,
                start_to_close_timeout=LOCAL_TIMEOUT,
                retry_policy=DB_RETRY,
                summary="debounce: how long until quiet",
            )
            if left.seconds <= 0:
                return
            workflow.set_current_details(f"debounce: waiting {left.seconds:.2f} s")
            await workflow.sleep(timedelta(seconds=left.seconds), summary="debounce")

    # -- one tool call ---------------------------------------------------------------------

    async def _settle(self, turn_id: str, step: int, call: ToolCallRef) -> None:
        """Run one call to its recorded outcome, pausing first for a person or the client."""
        decision: ToolDecision | None = None
        client_result: ToolResultSubmission | None = None
        if call.kind == "approval" and call.approval_id:
            decision = await self._decision(call, call.approval_id)
        elif call.kind == "client":
            await workflow.wait_condition(lambda: call.tool_call_id in self._client_results)
            client_result = self._client_results[call.tool_call_id]
        run = call.run
        tool_input = ToolCallInput(
            turn_id=turn_id,
            step=step,
            tool_call_id=call.tool_call_id,
            tool_name=call.tool_name,
            decision=decision,
            client_result=client_result,
        )
        if run.local or call.kind == "client":
            # In this workflow task: a marker in the history, no round trip through the server.
            await workflow.execute_local_activity(
                TOOL_CALL_ACTIVITY,
                tool_input,
                result_type=ToolCallResult,
                start_to_close_timeout=timedelta(seconds=run.timeout_seconds),
                retry_policy=DB_RETRY,
                summary=f"tool {call.tool_name}",
            )
        else:
            # A tool that asked for a heartbeat timeout: its own activity, watched by it.
            await workflow.execute_activity(
                TOOL_CALL_ACTIVITY,
                tool_input,
                result_type=ToolCallResult,
                start_to_close_timeout=timedelta(seconds=run.timeout_seconds),
                heartbeat_timeout=timedelta(seconds=run.heartbeat_seconds),
                retry_policy=DB_RETRY,
                summary=f"tool {call.tool_name}",
            )
        self._show_progress(step, "")

    async def _decision(self, call: ToolCallRef, approval_id: str) -> ToolDecision:
        timeout = call.run.approval_timeout_seconds
        try:
            await workflow.wait_condition(
                lambda: approval_id in self._decisions,
                timeout=timedelta(seconds=timeout) if timeout else None,
                timeout_summary=f"approval of {call.tool_name}",
            )
        except TimeoutError:
            self._decisions[approval_id] = ToolDecision(
                approval_id=approval_id,
                approved=False,
                reason=f"no decision within {timeout:g} seconds",
                by="timeout",
            )
        return self._decisions[approval_id]

    def _show_progress(self, step: int, model: str) -> None:
        """Say in the Temporal UI what the turn waits for, and keep ThinkTurnStatus in step."""
        waiting_approval = [c for i, c in self._approvals.items() if i not in self._decisions]
        waiting_client = [c for i, c in self._client_calls.items() if i not in self._client_results]
        if waiting_approval:
            status = "awaiting_approval"
            details = "; ".join(f"awaiting approval: {c.preview}" for c in waiting_approval)
        elif waiting_client:
            status = "awaiting_client_tool"
            details = "; ".join(f"awaiting client tool: {c.preview}" for c in waiting_client)
        else:
            status = "running"
            details = f"step {step + 1}{f' ({model})' if model else ''}: running tools"
        workflow.set_current_details(details)
        if status != self._shown_status:
            self._shown_status = status
            self._status(status)

    # -- decisions from people and clients -------------------------------------------------

    @workflow.update(name=APPROVE)
    async def approve(self, decision: ToolDecision) -> None:
        await self._known(lambda: decision.approval_id in self._approvals)
        if decision.approval_id not in self._approvals:
            raise ApplicationError(
                f"this turn has no approval request {decision.approval_id!r}",
                type=UNKNOWN_APPROVAL,
            )
        self._accept_decision(decision)

    @approve.validator
    def _check_approve(self, decision: ToolDecision) -> None:
        if decision.approval_id in self._decisions:
            raise ApplicationError(
                f"approval {decision.approval_id!r} is already decided", type=ALREADY_DECIDED
            )

    @workflow.signal(name=APPROVE)
    async def approve_signal(self, payload: Any) -> None:
        """The same as the Update, for the UI's "Send a Signal" button (the CLI should use the
        Update, which answers with an error). A signal cannot be refused, so a malformed,
        unknown or repeated decision is dropped with one log line naming the turn and why.

        The payload is taken as plain JSON and validated here: a typed parameter would make the
        SDK drop a misspelt key with a traceback in the worker's log and nothing else."""
        try:
            decision = ToolDecision.model_validate(payload)
        except ValidationError as error:
            _drop_signal(APPROVE, _input_problem(error, '{"approval_id": "…", "approved": true}'))
            return
        await self._known(lambda: decision.approval_id in self._approvals)
        if decision.approval_id not in self._approvals:
            waiting = ", ".join(repr(a) for a in self._approvals if a not in self._decisions)
            _drop_signal(
                APPROVE,
                f"no approval request {decision.approval_id!r}"
                + (f" (it waits for {waiting})" if waiting else " (it waits for none)"),
            )
            return
        if decision.approval_id in self._decisions:
            _drop_signal(APPROVE, f"approval {decision.approval_id!r} is already decided")
            return
        by = "signal" if decision.by == "update" else decision.by  # the gateway says "http"
        self._accept_decision(decision.model_copy(update={"by": by}))

    def _accept_decision(self, decision: ToolDecision) -> None:
        if decision.approval_id in self._decisions:
            raise ApplicationError(
                f"approval {decision.approval_id!r} is already decided", type=ALREADY_DECIDED
            )
        self._decisions[decision.approval_id] = decision
        self._show_progress(self._step, "")

    @workflow.update(name=SUBMIT_TOOL_RESULT)
    async def submit_tool_result(self, result: ToolResultSubmission) -> None:
        await self._known(lambda: result.tool_call_id in self._client_calls)
        if result.tool_call_id not in self._client_calls:
            raise ApplicationError(
                f"this turn waits for no client tool call {result.tool_call_id!r}",
                type=UNKNOWN_TOOL_CALL,
            )
        self._accept_result(result)

    @submit_tool_result.validator
    def _check_tool_result(self, result: ToolResultSubmission) -> None:
        if result.tool_call_id in self._client_results:
            raise ApplicationError(
                f"tool call {result.tool_call_id!r} already has a result", type=ALREADY_ANSWERED
            )

    @workflow.signal(name=SUBMIT_TOOL_RESULT)
    async def submit_tool_result_signal(self, payload: Any) -> None:
        """As `approve_signal`: plain JSON validated here, a bad one dropped with one line."""
        try:
            result = ToolResultSubmission.model_validate(payload)
        except ValidationError as error:
            _drop_signal(SUBMIT_TOOL_RESULT, _input_problem(error, '{"tool_call_id": "…"}'))
            return
        await self._known(lambda: result.tool_call_id in self._client_calls)
        if result.tool_call_id not in self._client_calls:
            _drop_signal(SUBMIT_TOOL_RESULT, f"no client tool call {result.tool_call_id!r}")
            return
        if result.tool_call_id in self._client_results:
            _drop_signal(
                SUBMIT_TOOL_RESULT, f"tool call {result.tool_call_id!r} already has a result"
            )
            return
        self._accept_result(result)

    def _accept_result(self, result: ToolResultSubmission) -> None:
        if result.tool_call_id in self._client_results:
            raise ApplicationError(
                f"tool call {result.tool_call_id!r} already has a result", type=ALREADY_ANSWERED
            )
        self._client_results[result.tool_call_id] = result
        self._show_progress(self._step, "")

    async def _known(self, found: Callable[[], bool]) -> None:
        """Wait while a model step is in flight: the id may be one it is about to announce
        (its activity stored it, and a client read it, before this workflow saw the result)."""
        await workflow.wait_condition(lambda: found() or not self._planning)

    @workflow.query(name=STATUS_QUERY)
    def status(self) -> TurnStatusView:
        return TurnStatusView(
            status=self._shown_status,
            step=self._step,
            pending_approvals=[
                PendingCall(
                    tool_call_id=c.tool_call_id,
                    tool_name=c.tool_name,
                    approval_id=i,
                    preview=c.preview,
                )
                for i, c in self._approvals.items()
                if i not in self._decisions
            ],
            pending_client_tools=[
                PendingCall(tool_call_id=i, tool_name=c.tool_name, preview=c.preview)
                for i, c in self._client_calls.items()
                if i not in self._client_results
            ],
        )

    async def _ended(
        self, inp: TurnInput, status: str, *, respond: bool, compact: bool = False
    ) -> CommitResult:
        self._status(status)
        workflow.set_current_details(status)
        if respond or compact:
            # `on_chat_response` runs once this turn is over and the conversation is free, so
            # it may start (and wait for) another turn: in a workflow of its own, left running.
            # Compaction after a turn runs there too, off the turn's path. A plain TurnInput
            # when there is nothing to compact, as before compaction existed.
            after: TurnInput = (
                AfterTurnInput(
                    conversation=inp.conversation,
                    turn_id=inp.turn_id,
                    respond=respond,
                    compact=True,
                )
                if compact
                else inp
            )
            summary = " and ".join(
                w for w, on in (("on_chat_response", respond), ("compaction", compact)) if on
            )
            await workflow.start_child_workflow(
                AFTER_TURN_WORKFLOW,
                after,
                # The turn's own id (`turn:...`): the same value the child had when ids were
                # `turn-<agent>-<conversation>-<turn>`, so histories of either kind replay.
                id=f"after-{workflow.info().workflow_id}",
                parent_close_policy=ParentClosePolicy.ABANDON,
                static_summary=f"{summary} of turn {inp.turn_id}",
            )
        return CommitResult(status=status)

    def _status(self, status: str) -> None:
        workflow.upsert_search_attributes([TURN_STATUS_KEY.value_set(status)])


@workflow.defn(name=AFTER_TURN_WORKFLOW)
class AfterTurnWorkflow:
    """Runs the agent's `on_chat_response` for a finished turn, and compacts the conversation
    if the turn left it over `compact_after` (both at once: neither waits for the other)."""

    @workflow.run
    async def run(self, inp: AfterTurnInput) -> None:
        jobs = []
        if inp.respond:
            jobs.append(
                workflow.execute_activity(
                    CHAT_RESPONSE_ACTIVITY,
                    inp,
                    start_to_close_timeout=timedelta(minutes=10),
                    heartbeat_timeout=timedelta(seconds=30),
                    retry_policy=DB_RETRY,
                    summary="on_chat_response",
                )
            )
        if inp.compact:
            jobs.append(
                workflow.execute_activity(
                    COMPACT_ACTIVITY,
                    inp,
                    start_to_close_timeout=timedelta(minutes=10),
                    heartbeat_timeout=timedelta(seconds=30),
                    # A summarising model that keeps failing is given up on (the next turn
                    # tries again); Postgres outages are retried inside those attempts' budget.
                    retry_policy=COMPACT_RETRY,
                    summary="compaction",
                )
            )
        await asyncio.gather(*jobs)


class Superseded(RuntimeError):
    """This workflow task is stale: a newer attempt of its step runs elsewhere. Not a
    `FailureError`, so it fails the workflow task (whose completion the server refuses
    anyway), never the turn, and nothing is recorded from here."""


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


def _drop_signal(name: str, why: str) -> None:
    """One warning line for a Signal the turn cannot use: the sender was told "succeeded"."""
    workflow.logger.warning(
        "dropped %s signal for turn %s: %s", name, workflow.info().workflow_id, why
    )


def _input_problem(error: ValidationError, expected: str) -> str:
    problems = "; ".join(
        f"{'.'.join(str(p) for p in e['loc']) or 'input'}: {e['msg']}"
        for e in error.errors(include_url=False, include_input=False)
    )
    return f"its input is not of the form {expected} ({problems})"
