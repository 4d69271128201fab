"""A messenger's webhook, received: verified, parsed, routed, admitted, its delivery started.

Ingestion is admission. The platform's event id is the turn's idempotency key and the thread
is the conversation, so every step is idempotent and a retried webhook (or 20 copies of one
at once) converges on one turn, one delivery row and one delivery workflow; only then is the
event id recorded (`messenger_events`), which lets a later copy answer at once. A burst of
messages in a thread is the agent's `messenger_concurrency` window as a "debounce": the turns
of the burst are merged into the first, whose delivery posts the one reply.
"""

from __future__ import annotations

import asyncio
import base64
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from think._messages import UIMessage
from think.agent import Think
from think.messenger_turns._buttons import press
from think.messenger_turns._hub import MessengerHub
from think.messengers import (
    AttachmentTooLarge,
    Challenge,
    Ignored,
    InboundEvent,
    Messenger,
    MessengerContext,
    Platform,
    PlatformError,
    ThreadRef,
    start_delivery,
)
from think.storage import TurnRequest, messenger_store
from think.storage.messenger_store import DeliveryRow, ThreadRow
from think.turns import admit, request_hash, turn_fingerprint

log = logging.getLogger("think.messengers")

TAKE_OVER_AFTER = 5.0
"""Seconds a copy of an event waits for the request handling it before taking over (every
step is idempotent, so two handlers converge on one turn)."""


@dataclass(frozen=True)
class WebhookAnswer:
    """What the route answers: a status, and a JSON body (a challenge's echo, or a note)."""

    status: int
    body: dict[str, Any]


async def receive(
    hub: MessengerHub,
    agent: type[Think],
    messenger: Messenger,
    headers: Mapping[str, str],
    body: bytes,
) -> WebhookAnswer:
    """Handle one webhook request end to end; 401 stores nothing."""
    platform = hub.client(agent.name, messenger)
    lowered = {k.lower(): v for k, v in headers.items()}
    if not platform.verify(lowered, body):
        return WebhookAnswer(401, {"detail": "the request is not verified as the platform's"})
    try:
        parsed = await platform.parse(body)
    except ValueError as exc:
        return WebhookAnswer(400, {"detail": str(exc)})
    if isinstance(parsed, Challenge):
        return WebhookAnswer(200, {"challenge": parsed.value})
    if isinstance(parsed, Ignored):
        log.debug("messenger %s ignored an update: %s", messenger.name, parsed.reason)
        return WebhookAnswer(200, {"ok": True, "ignored": parsed.reason})
    return await _event(hub, agent, messenger, platform, parsed)


async def _event(
    hub: MessengerHub,
    agent: type[Think],
    messenger: Messenger,
    platform: Platform,
    event: InboundEvent,
) -> WebhookAnswer:
    ids = (hub.settings.default_tenant, agent.name, messenger.name, event.event_id)
    async with hub.store.db.connection() as conn:
        claimed = await messenger_store.claim_event(conn, *ids)
    if not claimed and await _handled(hub, ids):
        return WebhookAnswer(200, {"ok": True, "duplicate": True})
    turn_id = await _handle(hub, agent, messenger, platform, event)
    async with hub.store.db.connection() as conn:
        await messenger_store.event_done(conn, *ids, turn_id)
    return WebhookAnswer(200, {"ok": True})


async def _handled(hub: MessengerHub, ids: tuple[str, str, str, str]) -> bool:
    """A copy of a claimed event: wait (a little) for whoever claimed it to finish, then make
    sure its delivery runs; False when it never finished (its handler died): take over."""
    deadline = asyncio.get_running_loop().time() + TAKE_OVER_AFTER
    while True:
        async with hub.store.db.connection() as conn:
            row = await messenger_store.get_event(conn, *ids)
        if row is not None and row.done:
            if row.turn_id:
                delivery = await messenger_store.delivery_of_turn(hub.store.db, row.turn_id)
                if delivery is not None and not delivery.ended:
                    await start_delivery(hub.temporal, hub.task_queue, delivery.id)
            return True
        if asyncio.get_running_loop().time() >= deadline:
            return False
        await asyncio.sleep(0.05)


async def _handle(
    hub: MessengerHub,
    agent: type[Think],
    messenger: Messenger,
    platform: Platform,
    event: InboundEvent,
) -> str | None:
    """Route the event, admit its turn and start its delivery; the turn's id, or None."""
    if event.button is not None and event.button.data[:2] in ("a:", "d:"):
        await press(hub, agent, messenger, platform, event)
        return None
    thread = await _thread(hub, agent, messenger, event)
    if not _routed(messenger, event, thread):
        return None
    parts = await _parts(messenger, platform, event)
    if not parts:
        return None
    turn_id = await _admit(hub, agent, messenger, event, thread, parts)
    delivery = await _deliver_turn(hub, agent, messenger, thread, turn_id)
    await start_delivery(hub.temporal, hub.task_queue, delivery.id)
    return turn_id


def conversation_id(messenger: Messenger, thread: ThreadRef) -> str:
    """The conversation a thread is: its own (`conversation="thread"`), or the messenger's
    one conversation (`"self"`)."""
    if messenger.conversation == "self":
        return messenger.name
    return f"{messenger.name}:{thread.key()}"


async def _thread(
    hub: MessengerHub, agent: type[Think], messenger: Messenger, event: InboundEvent
) -> ThreadRow:
    """The thread's row, saved (a mention subscribes it)."""
    row = ThreadRow(
        tenant=hub.settings.default_tenant,
        agent=agent.name,
        messenger=messenger.name,
        thread_key=event.thread.key(),
        chat=event.thread.chat,
        thread=event.thread.thread,
        conversation_id=conversation_id(messenger, event.thread),
        subscribed=event.mentions_bot and not event.is_dm,
    )
    async with hub.store.db.transaction() as conn:
        return await messenger_store.save_thread(conn, row)


def _routed(messenger: Messenger, event: InboundEvent, thread: ThreadRow) -> bool:
    """Whether the event reaches the model (`Messenger.respond_to`)."""
    respond = set(messenger.respond_to)
    if event.button is not None:
        return "action" in respond
    if event.is_dm:
        return "dm" in respond
    if event.mentions_bot:
        return "mention" in respond
    return thread.subscribed and "subscribed-thread" in respond


async def _parts(
    messenger: Messenger, platform: Platform, event: InboundEvent
) -> list[dict[str, Any]]:
    """The user message's parts: the text (with the speaker's label in a group, so the model
    knows who said what), then each attachment as a file part; an attachment over the limit
    is left out and the thread is told."""
    text = event.text
    if event.button is not None:
        text = f"(pressed the button {event.button.data!r})"
    parts: list[dict[str, Any]] = []
    if text.strip():
        shown = text if event.chat_kind == "private" else f"[{event.author.label}]: {text}"
        parts.append({"type": "text", "text": shown})
    for ref in event.attachments:
        try:
            data = await platform.fetch_attachment(ref, messenger.max_attachment_bytes)
        except AttachmentTooLarge as exc:
            note = f"I could not read {exc.filename}: it is over the {exc.limit:,}-byte limit."
            try:
                await platform.send(event.thread, platform.format(note))
            except PlatformError:
                log.warning("telling %s about a refused attachment failed", event.thread)
            parts.append({"type": "text", "text": f"(an attachment was refused: {exc})"})
            continue
        except PlatformError as exc:  # the platform or the network failed: say so, go on
            log.warning("attachment %s of update %s: %s", ref.filename, event.event_id, exc)
            parts.append(
                {"type": "text", "text": f"(an attachment could not be read: {ref.filename})"}
            )
            continue
        url = f"data:{ref.media_type};base64,{base64.b64encode(data).decode()}"
        parts.append(
            {"type": "file", "mediaType": ref.media_type, "filename": ref.filename, "url": url}
        )
    return parts


async def _admit(
    hub: MessengerHub,
    agent: type[Think],
    messenger: Messenger,
    event: InboundEvent,
    thread: ThreadRow,
    parts: list[dict[str, Any]],
) -> str:
    window = float(agent.messenger_concurrency)
    context = MessengerContext(
        messenger=messenger.name,
        platform=messenger.platform,
        thread=event.thread,
        author=event.author,
        chat_kind=event.chat_kind,
    )
    message = UIMessage(id=f"msg-{messenger.name}-{event.event_id}", role="user", parts=parts)
    request = TurnRequest(
        messages=[message],
        concurrency="debounce" if window > 0 else "queue",
        debounce_seconds=window if window > 0 else None,
        channel=messenger.name,
        messenger_context=context.model_dump(mode="json"),
        priority=agent.priority,
    )
    key = f"{messenger.name}:{event.event_id}"
    fingerprint = turn_fingerprint(request, input=message.model_dump(mode="json"))
    admission = await admit(
        hub.store,
        hub.temporal,
        hub.task_queue,
        tenant=hub.settings.default_tenant,
        agent=agent.name,
        conversation_id=thread.conversation_id,
        request=request,
        request_hash=request_hash(fingerprint),
        idempotency_key=key,
    )
    return admission.turn.id


async def _deliver_turn(
    hub: MessengerHub,
    agent: type[Think],
    messenger: Messenger,
    thread: ThreadRow,
    turn_id: str,
) -> DeliveryRow:
    row = DeliveryRow(
        id=f"dlv-{turn_id}",
        tenant=hub.settings.default_tenant,
        agent=agent.name,
        messenger=messenger.name,
        conversation_id=thread.conversation_id,
        turn_id=turn_id,
        chat=thread.chat,
        thread=thread.thread,
        kind="reply",
        text=None,
        stage="accepted",
        message_ids=[],
        attempts=0,
        created_at=datetime.now(UTC),
    )
    async with hub.store.db.transaction() as conn:
        return await messenger_store.create_delivery(conn, row)


__all__ = ["WebhookAnswer", "conversation_id", "receive"]
