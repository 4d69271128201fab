"""`think.RetentionSweep` (what the deployment's retention schedule starts) and
`think.EraseTenant` (what `DELETE /v1/tenant-data` starts): one activity each, retried until
it has done its work, so an erasure accepted with a 202 completes whatever fails meanwhile.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy

# Pydantic models and constant names only: the data converter needs the classes here.
with workflow.unsafe.imports_passed_through():
    from think.retention._inputs import EraseInput, EraseResult, SweepInput, SweepResult
    from think.retention._names import (
        ERASE_ACTIVITY,
        ERASE_WORKFLOW,
        SWEEP_ACTIVITY,
        SWEEP_WORKFLOW,
    )

HEARTBEAT = timedelta(minutes=2)
"""A batch (a hundred conversations, each deleted with its turns ended) heartbeats within it."""
ATTEMPT = timedelta(hours=1)
RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    maximum_interval=timedelta(minutes=1),
    maximum_attempts=24 * 60 + 10,
)
"""A day of attempts at the one-minute ceiling: an erasure or a sweep rides out any outage a
turn would, and more; bounded, as every activity of Think's is (tests/durability/
test_retry_policies.py). A sweep given up is run again by its Schedule; an erasure, by asking
again (`DELETE /v1/tenant-data` is idempotent)."""


@workflow.defn(name=SWEEP_WORKFLOW)
class RetentionSweep:
    @workflow.run
    async def run(self, input: SweepInput) -> SweepResult:
        result: SweepResult = await workflow.execute_activity(
            SWEEP_ACTIVITY,
            input,
            result_type=SweepResult,
            start_to_close_timeout=ATTEMPT,
            heartbeat_timeout=HEARTBEAT,
            retry_policy=RETRY,
        )
        return result


@workflow.defn(name=ERASE_WORKFLOW)
class EraseTenant:
    @workflow.run
    async def run(self, input: EraseInput) -> EraseResult:
        result: EraseResult = await workflow.execute_activity(
            ERASE_ACTIVITY,
            input,
            result_type=EraseResult,
            start_to_close_timeout=ATTEMPT,
            heartbeat_timeout=HEARTBEAT,
            retry_policy=RETRY,
        )
        return result
