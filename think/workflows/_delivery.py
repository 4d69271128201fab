"""A messenger delivery's workflow: one activity that posts a reply (or notice) into its chat
thread, following the turn's stream. The workflow adds nothing to the turn's own history;
it exists so that the delivery outlives the process that started it: a worker that dies
mid-delivery is noticed by the activity's heartbeat timeout, and the retry (on any worker)
reads the delivery's stage in Postgres and decides there whether to send or to post the
interruption notice (`think.messenger_turns`)."""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    # A pydantic model: passed through so the sandbox does not re-import pydantic per run.
    from think.workflows.inputs import DeliveryInput
    from think.workflows.names import DELIVERY_ACTIVITY, DELIVERY_WORKFLOW

HEARTBEAT_TIMEOUT = timedelta(seconds=3)
"""How soon a dead worker's delivery is taken over (the activity heartbeats every second,
from beside its work)."""
LONGEST = timedelta(days=2)
"""A delivery follows its turn through pauses for approval: as long as a turn may wait."""
RETRY = RetryPolicy(
    initial_interval=timedelta(milliseconds=200),
    maximum_interval=timedelta(seconds=30),
    # Bounded, as every activity of ours is (tests/durability/test_retry_policies.py): a
    # worker that dies mid-delivery is taken over by the next attempt; 30 attempts at up to
    # 30 s apart outlast any deploy, and a platform that refuses for longer is failing, not slow.
    maximum_attempts=30,
    non_retryable_error_types=["MessengerConfigError"],
)


@workflow.defn(name=DELIVERY_WORKFLOW)
class DeliveryWorkflow:
    @workflow.run
    async def run(self, inp: DeliveryInput) -> str:
        stage: str = await workflow.execute_activity(
            DELIVERY_ACTIVITY,
            inp,
            result_type=str,
            start_to_close_timeout=LONGEST,
            heartbeat_timeout=HEARTBEAT_TIMEOUT,
            retry_policy=RETRY,
        )
        return stage
