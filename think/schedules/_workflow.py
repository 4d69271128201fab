"""`think.ScheduledOccurrence`: what a Temporal Schedule starts for each occurrence.

One activity and nothing else, so an occurrence's history stays at a handful of events:
settle the intended time (Temporal's `TemporalScheduledStartTime`, the same on every
retry of the workflow), then run the action with the task's `retry` as its attempts. A
failure that exhausts them is logged and fails this run only; the schedule starts the next
occurrence regardless.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError

# Pydantic models and constant names only: the data converter needs the classes here.
with workflow.unsafe.imports_passed_through():
    from think.schedules._inputs import OccurrenceInput, OccurrenceRequest, OccurrenceResult
    from think.schedules._names import (
        OCCURRENCE_ACTIVITY,
        OCCURRENCE_WORKFLOW,
        SCHEDULED_START_KEY,
    )

TRANSIENT_ATTEMPTS = 130
"""About an hour of attempts 30 s apart: how long an occurrence outlasts an outage."""
ACTION_TIMEOUT = timedelta(minutes=10)
"""A handler's budget per attempt; a prompt task's admission takes milliseconds."""


@workflow.defn(name=OCCURRENCE_WORKFLOW)
class ScheduledOccurrence:
    @workflow.run
    async def run(self, input: OccurrenceInput) -> OccurrenceResult:
        info = workflow.info()
        scheduled_for = (
            input.scheduled_for
            or info.typed_search_attributes.get(SCHEDULED_START_KEY)
            or info.start_time
        )
        try:
            result: OccurrenceResult = await workflow.execute_activity(
                OCCURRENCE_ACTIVITY,
                OccurrenceRequest(occurrence=input, scheduled_for=scheduled_for),
                result_type=OccurrenceResult,
                start_to_close_timeout=ACTION_TIMEOUT,
                # The task's `retry` bounds the action's own failures (the activity counts
                # them, `bounded_failures`); Postgres or Temporal outages are retried for up
                # to an hour, at most 30 s apart.
                retry_policy=RetryPolicy(
                    initial_interval=timedelta(seconds=1),
                    maximum_interval=timedelta(seconds=30),
                    maximum_attempts=max(input.attempts, TRANSIENT_ATTEMPTS),
                ),
            )
        except ActivityError as error:
            cause = error.cause or error
            workflow.logger.error(
                "scheduled task %r of %s failed after %d attempt(s): %s",
                input.task,
                input.agent,
                max(1, input.attempts),  # an outage's own attempts are not the task's
                cause,
            )
            raise ApplicationError(
                f"scheduled task {input.task!r} failed: {cause}",
                type="ScheduledTaskFailed",
                non_retryable=True,
            ) from error
        return result
