"""Accept a webhook once, run a Think turn, post the reply: a Temporal workflow of your own
that calls `think.workflow.run_turn` (docs/workflows.md).

    THINK_WORKFLOWS=examples.webhook_reply:WebhookReply \\
    THINK_ACTIVITIES=examples.webhook_reply:post_reply think dev

Your webhook endpoint calls `accept(client, ticket)`: the workflow's id is the event's id,
so a webhook delivered twice starts one workflow. The workflow runs one turn of the bundled
assistant in the ticket's conversation, asking for a `Triage` (structured output), and posts
the reply with an activity. A worker that dies anywhere in between changes nothing: the turn
is admitted once, and the reply is posted once per successful call of `post_reply`, with the
event's id as its idempotency key for the receiving end.
"""

from __future__ import annotations

import contextlib
from datetime import timedelta
from typing import Literal

from pydantic import BaseModel
from temporalio import activity, workflow
from temporalio.client import Client
from temporalio.common import WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError

with workflow.unsafe.imports_passed_through():
    # httpx is used by the activity only; passed through, the workflow sandbox does not
    # import it again for every run.
    import httpx

    from think.workflow import run_turn


class Ticket(BaseModel):
    """What the webhook delivered."""

    event_id: str
    text: str
    reply_url: str


class Triage(BaseModel):
    """What the agent answers about a ticket: the turn's structured output."""

    severity: Literal["low", "high"]
    reply: str


class Reply(BaseModel):
    event_id: str
    url: str
    text: str
    severity: str


@activity.defn(name="examples.post_reply")
async def post_reply(reply: Reply) -> None:
    """Post the reply where the webhook said; the event's id lets the receiver drop a repeat
    (an activity runs at least once)."""
    async with httpx.AsyncClient(timeout=10) as client:
        answer = await client.post(
            reply.url,
            json={"text": reply.text, "severity": reply.severity},
            headers={"Idempotency-Key": reply.event_id},
        )
        answer.raise_for_status()


@workflow.defn(name="examples.WebhookReply")
class WebhookReply:
    @workflow.run
    async def run(self, ticket: Ticket) -> str:
        result = await run_turn(
            "assistant", f"ticket-{ticket.event_id}", ticket.text, output_type=Triage
        )
        if result.output is not None:
            text, severity = result.output.reply, result.output.severity
        else:  # the turn failed, was cancelled or skipped: say so rather than nothing
            text, severity = f"We could not answer this ticket ({result.status}).", "high"
        await workflow.execute_activity(
            post_reply,
            Reply(event_id=ticket.event_id, url=ticket.reply_url, text=text, severity=severity),
            start_to_close_timeout=timedelta(seconds=30),
        )
        return result.status


async def accept(client: Client, ticket: Ticket, task_queue: str = "think") -> None:
    """The webhook's handler: start the workflow once per event, however often it arrives.
    `client` must use `temporalio.contrib.pydantic.pydantic_data_converter`, as Think's does."""
    with contextlib.suppress(WorkflowAlreadyStartedError):  # delivered before
        await client.start_workflow(
            WebhookReply.run,
            ticket,
            id=f"webhook-{ticket.event_id}",
            task_queue=task_queue,
            # Not even after it has finished: a late repeat of the webhook is dropped.
            id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
        )
