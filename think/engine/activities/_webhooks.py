"""The activities of outbound webhooks: `start_webhooks`, run by a turn's workflow (a local
activity) when the turn ends or pauses, starts one `think.WebhookDelivery` workflow per
subscribed URL; `post_webhook` is one attempt at one delivery (docs/webhooks.md).

A delivery's workflow id is a function of its event and URL (`webhook_workflow_id`), and a
second start of it is refused by Temporal: a retried or replayed start delivers nothing twice.
"""

from __future__ import annotations

import asyncio
import logging
import os
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import httpx
from temporalio import activity
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.exceptions import (
    ApplicationError,
    ApplicationErrorCategory,
    WorkflowAlreadyStartedError,
)

from think.engine.activities._resources import ActivityResources
from think.exceptions import NON_RETRYABLE_USER_ERROR
from think.webhooks import (
    EVENT_HEADER,
    EVENT_ID_HEADER,
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
    PausedCall,
    Refused,
    WebhookEvent,
    checked_webhooks,
    event_of,
    payload_of,
    post,
    signature,
    signed_body,
)
from think.workflows.inputs import (
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
    webhook_workflow_id,
)

log = logging.getLogger("think.webhooks")
BENIGN = ApplicationErrorCategory.BENIGN


@dataclass(frozen=True)
class Subscription:
    url: str
    events: frozenset[str]
    secret_env: str | None
    """None: the deployment's `THINK_WEBHOOK_SECRET`."""


class WebhookActivities:
    """Who gets which event (per agent, worked out once per worker) and the two activities."""

    def __init__(self, res: ActivityResources) -> None:
        self.res = res
        self._subscriptions: dict[str, list[Subscription]] = {}

    def activities(self) -> list[object]:
        return [self.start_webhooks, self.post_webhook]

    def subscriptions(self, agent: str) -> list[Subscription]:
        """The agent's own webhooks, then the deployment's (`THINK_WEBHOOK_URLS`, every
        event); [] for an agent this worker does not host."""
        found = self._subscriptions.get(agent)
        if found is None:
            if agent not in self.res.registry:
                return []
            cls = self.res.registry.get(agent)
            found = [
                Subscription(h.url, frozenset(h.events), h.secret_env)
                for h in checked_webhooks(cls.__name__, cls.webhooks)
            ]
            found += [
                Subscription(url, frozenset(("turn.completed", "turn.error", "turn.paused")), None)
                for url in self.res.settings.webhook_urls
            ]
            self._subscriptions[agent] = found
        return found

    def wanted(self, agent: str) -> bool:
        """Whether a turn of `agent` starts deliveries: the flag a step or commit answers
        the workflow with (no webhooks, no history event and no round trip)."""
        return bool(agent) and bool(self.subscriptions(agent))

    @activity.defn(name=WEBHOOKS_START_ACTIVITY)
    async def start_webhooks(self, inp: WebhooksStartInput) -> WebhooksStarted:
        turn = await self.res.store.get_turn(inp.turn_id)
        if turn is None:
            return WebhooksStarted()
        paused = [
            PausedCall(
                tool_call_id=c.tool_call_id,
                tool_name=c.tool_name,
                kind="approval" if c.approval_id else c.kind,
                approval_id=c.approval_id,
            )
            for c in inp.paused
        ]
        event: WebhookEvent | None = "turn.paused" if paused else event_of(turn.status)
        if event is None:
            return WebhooksStarted()
        targets = [s for s in self.subscriptions(turn.agent) if event in s.events]
        if not targets:
            return WebhooksStarted()
        payload = payload_of(turn, event, paused)
        body = payload.model_dump(mode="json")
        settings = self.res.settings
        started = await asyncio.gather(
            *(
                self._start(
                    WebhookDeliveryInput(
                        url=target.url,
                        event_id=payload.id,
                        event=event,
                        payload=body,
                        secret_env=target.secret_env,
                        retry_seconds=settings.webhook_retry_seconds,
                        give_up_seconds=settings.webhook_give_up_seconds,
                        timeout_seconds=settings.webhook_timeout_seconds,
                    )
                )
                for target in targets
            )
        )
        return WebhooksStarted(started=sum(started))

    async def _start(self, inp: WebhookDeliveryInput) -> int:
        temporal = self.res.temporal
        if temporal is None:
            raise ApplicationError("this worker has no Temporal client", non_retryable=True)
        try:
            await temporal.start_workflow(
                WEBHOOK_DELIVERY_WORKFLOW,
                inp,
                id=webhook_workflow_id(inp.event_id, inp.url),
                task_queue=self.res.settings.task_queue,
                result_type=WebhookDeliveryResult,
                id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
                id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
                static_summary=f"{inp.event} to {inp.url}",
            )
        except WorkflowAlreadyStartedError:
            return 0  # delivered (or given up) already: a retried start
        return 1

    @activity.defn(name=WEBHOOK_POST_ACTIVITY)
    async def post_webhook(self, inp: WebhookDeliveryInput) -> WebhookDeliveryResult:
        """One attempt. 2xx: delivered. A 4xx other than 408/429 (or a redirect): refused
        for good, not retried. Anything else raises, and Temporal retries it with backoff."""
        settings = self.res.settings
        secret = (
            os.environ.get(inp.secret_env, "")  # the agent's variable: read where it is used
            if inp.secret_env is not None
            else settings.webhook_secret or ""
        )
        if not secret:
            where = f"${inp.secret_env}" if inp.secret_env else "THINK_WEBHOOK_SECRET"
            raise ApplicationError(
                f"the webhook to {inp.url} cannot be signed: {where} is not set on this worker",
                type=NON_RETRYABLE_USER_ERROR,
                non_retryable=True,
            )
        info = activity.info()
        now = datetime.now(UTC)
        body = signed_body(inp.payload, sent_at=now.isoformat(), attempt=info.attempt)
        headers = {
            "content-type": "application/json",
            "user-agent": "think-webhooks",
            EVENT_ID_HEADER: inp.event_id,
            EVENT_HEADER: inp.event,
            TIMESTAMP_HEADER: str(int(now.timestamp())),
            SIGNATURE_HEADER: signature(body, secret),
        }
        try:
            answer = await post(
                inp.url,
                body,
                headers,
                private_hosts=settings.webhook_private_hosts,
                timeout=inp.timeout_seconds,
            )
        except Refused as exc:
            log.warning("webhook %s to %s refused: %s", inp.event_id, inp.url, exc)
            raise ApplicationError(
                str(exc), type=WEBHOOK_REJECTED, non_retryable=True, category=BENIGN
            ) from None
        except httpx.HTTPError as exc:
            # Connection refused, reset or timed out: the receiver may be back later.
            raise ApplicationError(
                f"{inp.url}: {type(exc).__name__}: {exc}", category=BENIGN
            ) from None
        if answer.delivered:
            return WebhookDeliveryResult(status="delivered", http_status=answer.status)
        if answer.permanent:
            log.warning(
                "webhook %s to %s refused with HTTP %d: not retried",
                inp.event_id,
                inp.url,
                answer.status,
            )
            raise ApplicationError(
                f"{inp.url} answered HTTP {answer.status}",
                answer.status,
                type=WEBHOOK_REJECTED,
                non_retryable=True,
                category=BENIGN,
            )
        delay = timedelta(seconds=answer.retry_after) if answer.retry_after is not None else None
        log.info(
            "webhook %s to %s: HTTP %d on attempt %d, retried",
            inp.event_id,
            inp.url,
            answer.status,
            info.attempt,
        )
        raise ApplicationError(
            f"{inp.url} answered HTTP {answer.status}",
            answer.status,
            next_retry_delay=delay,
            category=BENIGN,  # the receiver's failure, not ours: one log line, no traceback
        )
