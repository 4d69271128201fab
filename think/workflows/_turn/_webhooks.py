"""Outbound webhooks, on the workflow side: starting a turn's deliveries (one local activity,
only for agents that have webhooks) and `WebhookDeliveryWorkflow`, which owns one event's
delivery to one URL: its retries and backoff are Temporal's, its id is deterministic."""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from think.workflows.inputs import (
        ToolCallRef,
        WebhookDeliveryInput,
        WebhookDeliveryResult,
        WebhooksStarted,
        WebhooksStartInput,
    )
    from think.workflows.names import (
        WEBHOOK_DELIVERY_WORKFLOW,
        WEBHOOK_POST_ACTIVITY,
        WEBHOOK_REJECTED,
        WEBHOOKS_START_ACTIVITY,
    )

from think.workflows._turn._activities import database_step

MAX_BACKOFF = timedelta(minutes=10)
"""The longest wait between two attempts at one delivery."""


async def start_webhooks(turn_id: str, paused: list[ToolCallRef] | None = None) -> None:
    """Start the deliveries of the turn's end (or of its pause for `paused`): a local activity,
    one marker in this workflow task, in the turn's history only when its agent has webhooks.
    The deliveries are workflows of their own: a receiver that fails delays nothing here."""
    await database_step(
        WEBHOOKS_START_ACTIVITY,
        WebhooksStartInput(turn_id=turn_id, paused=paused or []),
        result_type=WebhooksStarted,
        summary="start webhook deliveries",
    )


def pausing(calls: list[ToolCallRef]) -> list[ToolCallRef]:
    """The calls of a step that wait for a person (an approval) or for the client."""
    return [c for c in calls if c.kind in ("approval", "client") or c.approval_id]


@workflow.defn(name=WEBHOOK_DELIVERY_WORKFLOW)
class WebhookDeliveryWorkflow:
    """POST one event to one URL until it answers 2xx, it refuses it for good (a 4xx other
    than 408 and 429), or `give_up_seconds` have passed."""

    @workflow.run
    async def run(self, inp: WebhookDeliveryInput) -> WebhookDeliveryResult:
        policy = RetryPolicy(
            initial_interval=timedelta(seconds=inp.retry_seconds),
            backoff_coefficient=2.0,
            maximum_interval=max(MAX_BACKOFF, timedelta(seconds=inp.retry_seconds)),
            # `give_up_seconds` (the schedule-to-close timeout) is the bound that matters;
            # the count is the rule every activity of ours keeps, never reached before it.
            maximum_attempts=1_000,
            non_retryable_error_types=[WEBHOOK_REJECTED],
        )
        try:
            result: WebhookDeliveryResult = await workflow.execute_activity(
                WEBHOOK_POST_ACTIVITY,
                inp,
                result_type=WebhookDeliveryResult,
                start_to_close_timeout=timedelta(seconds=inp.timeout_seconds + 5),
                schedule_to_close_timeout=timedelta(seconds=inp.give_up_seconds),
                retry_policy=policy,
                summary=f"POST {inp.event} to {inp.url}",
            )
            return result
        except ActivityError as exc:
            cause = exc.cause
            if isinstance(cause, ApplicationError) and cause.type == WEBHOOK_REJECTED:
                status = cause.details[0] if cause.details else None
                # Logged by the attempt that was refused (`think.webhooks`).
                return WebhookDeliveryResult(
                    status="rejected",
                    http_status=status if isinstance(status, int) else None,
                    detail=cause.message,
                )
            workflow.logger.warning("webhook %s to %s given up: %s", inp.event_id, inp.url, exc)
            return WebhookDeliveryResult(status="gave_up", detail=str(cause or exc))
