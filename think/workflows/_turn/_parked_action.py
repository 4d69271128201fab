"""The parked action's workflow: an `@action(approval="durable_pause")` call waits here, not in
its turn, so the turn ends at once and the conversation goes on while a person takes a day.

It holds a timer and a decision, nothing else: the decision comes as the `approve` Signal (the
gateway sends it after recording the decision in the ledger, which is where concurrent
decisions find their one winner) or the `approve` Update (an operator in the Temporal UI or CLI,
answered with the outcome); the one activity then records the decision if none was recorded,
runs the action once (or expires or rejects it) and tells the conversation. A waiting workflow
costs a timer and no worker; its history is four events until the decision.
"""

from __future__ import annotations

import asyncio
import contextlib
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from think.workflows._turn._activities import TRANSIENT_BUDGET
    from think.workflows._turn._signals import signal_payload
    from think.workflows.inputs import (
        ParkedActionInput,
        ParkedActionOutcome,
        ParkedActionRun,
        ToolDecision,
    )
    from think.workflows.names import (
        ALREADY_DECIDED,
        APPROVE,
        PARKED_ACTION_ACTIVITY,
        PARKED_ACTION_WORKFLOW,
        UNKNOWN_APPROVAL,
    )


PARKED_ACTION_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    maximum_interval=timedelta(seconds=30),
    # The action's own failures are recorded by the activity, not raised: what is retried is a
    # crash mid-run (reclaimed with the same idempotency key) or an outage, for as long as a
    # turn rides one out.
    maximum_attempts=int(TRANSIENT_BUDGET / timedelta(seconds=30)) + 10,
)


@workflow.defn(name=PARKED_ACTION_WORKFLOW)
class ParkedActionWorkflow:
    def __init__(self) -> None:
        self._approval_id = ""
        self._decision: ToolDecision | None = None
        self._outcome: ParkedActionOutcome | None = None

    @workflow.run
    async def run(self, inp: ParkedActionInput) -> ParkedActionOutcome:
        self._approval_id = inp.approval_id
        with contextlib.suppress(asyncio.TimeoutError):
            await workflow.wait_condition(
                lambda: self._decision is not None,
                timeout=timedelta(seconds=inp.wait_seconds),
                timeout_summary="waiting for a decision",
            )
        self._outcome = await workflow.execute_activity(
            PARKED_ACTION_ACTIVITY,
            ParkedActionRun(action_id=inp.action_id, decision=self._decision),
            result_type=ParkedActionOutcome,
            start_to_close_timeout=timedelta(seconds=inp.run_timeout_seconds),
            heartbeat_timeout=timedelta(seconds=30),
            retry_policy=PARKED_ACTION_RETRY,
            summary=f"{inp.action} ({'decided' if self._decision else 'expired'})",
        )
        return self._outcome

    @workflow.update(name=APPROVE)
    async def approve(self, decision: ToolDecision) -> ParkedActionOutcome:
        """Decide, and answer with the outcome once the action ran (or was refused). The
        ledger's first decision stands: a decision recorded over HTTP before this one wins,
        and the outcome says so."""
        self._decision = self._decision or decision
        await workflow.wait_condition(lambda: self._outcome is not None)
        assert self._outcome is not None
        return self._outcome

    @approve.validator
    def _check_approve(self, decision: ToolDecision) -> None:
        if decision.approval_id != self._approval_id:
            raise ApplicationError(
                f"this parked action waits for approval {self._approval_id!r}, not "
                f"{decision.approval_id!r}",
                type=UNKNOWN_APPROVAL,
                non_retryable=True,
            )
        if self._decision is not None:
            raise ApplicationError(
                f"approval {decision.approval_id!r} is already decided",
                type=ALREADY_DECIDED,
                non_retryable=True,
            )

    @workflow.signal(name=APPROVE)
    def approve_signal(self, payload: Any) -> None:
        """The decision, as the gateway (after recording it) or the UI's "Send a Signal"
        sends it; a malformed one, another approval's, or a second one is dropped."""
        expected = '{"approval_id": "…", "approved": true}'
        decision = signal_payload(APPROVE, ToolDecision, payload, expected)
        if decision is None or decision.approval_id != self._approval_id:
            return
        if self._decision is None:
            self._decision = decision
