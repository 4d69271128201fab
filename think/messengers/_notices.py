"""Out-of-band notices: `Think.deliver_notice(conversation_id, text)` posts `text` into the
chat thread a messenger conversation answers in (a scheduled task's result, a reminder),
recorded in its transcript as an assistant message if asked. The post is a delivery like a
reply's (`messenger_deliveries`, kind "notice"), carried out by the delivery workflow, so it
survives the caller's worker dying; its id is derived from the calling turn and the text, so
a retried hook posts it once."""

from __future__ import annotations

import contextlib
import hashlib
import uuid
from datetime import UTC, datetime

from temporalio import activity
from temporalio.client import Client
from temporalio.common import WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError

from think._current import bound_service, bound_turn_record
from think._messages import UIMessage
from think.exceptions import UserError
from think.storage import messenger_store
from think.storage.messenger_store import DeliveryRow
from think.workflows.inputs import DeliveryInput
from think.workflows.names import DELIVERY_WORKFLOW, delivery_workflow_id


async def start_delivery(temporal: Client, task_queue: str, delivery_id: str) -> None:
    """Start a delivery's workflow; one already started (or run) is left as it is."""
    with contextlib.suppress(WorkflowAlreadyStartedError):
        await temporal.start_workflow(
            DELIVERY_WORKFLOW,
            DeliveryInput(delivery_id=delivery_id),
            id=delivery_workflow_id(delivery_id),
            task_queue=task_queue,
            id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
        )


async def deliver_notice(
    agent: str, conversation_id: str, text: str, *, record: bool = True, key: str | None = None
) -> str:
    """Post `text` into the thread of `agent`'s messenger conversation `conversation_id`
    (and add it to the transcript when `record`); the delivery's id. On a worker, in any of
    its activities: a hook or tool of a turn, a scheduled task's handler. `key` makes it
    idempotent (the same key posts once); by default the calling turn, or the calling
    activity (stable across its retries)."""
    service = bound_service()
    if service is None:
        raise UserError(
            "deliver_notice() works on a worker (a hook or tool, a scheduled task's handler): "
            "it posts through that worker's connections"
        )
    if not text.strip():
        raise UserError("deliver_notice(): the text is empty")
    turn = await bound_turn_record()
    tenant = turn.tenant if turn is not None else service.settings.default_tenant
    db = service.store.db
    thread = await messenger_store.thread_of_conversation(db, tenant, agent, conversation_id)
    if thread is None:
        raise UserError(
            f"conversation {conversation_id!r} of {agent!r} has no messenger thread: only a "
            "conversation a messenger started (or its 'self' conversation) can take a notice"
        )
    caller = key or (turn.id if turn is not None else _activity_key())
    digest = hashlib.sha256(f"{caller}\0{conversation_id}\0{text}".encode()).hexdigest()[:24]
    if record:
        message = UIMessage(
            id=f"msg-notice-{digest}",
            role="assistant",
            parts=[{"type": "text", "text": text}],
            metadata={"notice": True, "channel": thread.messenger},
        )
        handle = service.conversation(agent, conversation_id, tenant=tenant)
        await handle.add_messages([message])
    row = DeliveryRow(
        id=f"notice-{digest}",
        tenant=tenant,
        agent=agent,
        messenger=thread.messenger,
        conversation_id=conversation_id,
        turn_id=None,
        chat=thread.chat,
        thread=thread.thread,
        kind="notice",
        text=text,
        stage="accepted",
        message_ids=[],
        attempts=0,
        created_at=datetime.now(UTC),
    )
    async with db.transaction() as conn:
        made = await messenger_store.create_delivery(conn, row)
    await start_delivery(service.temporal, service.settings.task_queue, made.id)
    return made.id


def _activity_key() -> str:
    """The calling activity, the same across its retries; a fresh id outside one."""
    try:
        info = activity.info()
    except RuntimeError:
        return uuid.uuid4().hex
    return f"{info.workflow_id}/{info.activity_id}"
