"""What a webhook says: the event of a turn, its stable id, its JSON body and its signature.

The body is built once when the delivery starts (so every attempt says the same), then each
attempt adds `sent_at` and `attempt` and signs the exact bytes it sends."""

from __future__ import annotations

import hashlib
import hmac
import json
import uuid
from datetime import datetime
from typing import Any

from pydantic import BaseModel

from think._protocol import joined_text, last_step_text, parts_of
from think.storage import TurnRecord
from think.webhooks._declaration import WebhookEvent

EVENT_IDS = uuid.UUID("6c1f7a52-3b7e-4b7e-9a51-0c2f3d4e5a6b")
"""The namespace of event ids (uuid5): the same event always has the same id."""

SIGNATURE_HEADER = "x-think-signature"
EVENT_ID_HEADER = "x-think-event-id"
EVENT_HEADER = "x-think-event"
TIMESTAMP_HEADER = "x-think-timestamp"


class PausedCall(BaseModel):
    """A call the paused turn waits on."""

    tool_call_id: str
    tool_name: str
    kind: str
    """`approval` (a person decides) or `client` (the client runs the tool)."""
    approval_id: str | None = None


class WebhookPayload(BaseModel):
    """The JSON body of every webhook POST (docs/webhooks.md)."""

    type: WebhookEvent
    id: str
    """The event id, also in `x-think-event-id`: the same on every attempt; dedupe on it."""
    tenant: str
    agent: str
    conversation_id: str
    turn_id: str
    status: str
    """The turn's status as stored: `completed`, `error` or `interrupted` at its end;
    `awaiting_approval` or `awaiting_client_tool` for a pause."""
    text: str | None = None
    """The answer: the text of the turn's last step (earlier steps' text came before tool
    calls), when there is one; for a pause, what the model said before it."""
    error: str | None = None
    output: Any = None
    """A structured answer's value, when the turn asked for one."""
    paused: list[PausedCall] = []
    channel: str = "web"
    created_at: datetime
    ended_at: datetime | None = None


def event_of(status: str) -> WebhookEvent | None:
    """The event a turn that ended with `status` raises; None for one that raises none (an
    aborted turn: someone cancelled it, and knows)."""
    if status == "completed":
        return "turn.completed"
    if status in ("error", "interrupted"):
        return "turn.error"
    return None


def event_id(turn_id: str, event: str, paused: list[PausedCall]) -> str:
    """Stable for an event: its turn, its type and, for a pause, the calls it waits on."""
    key = ":".join([turn_id, event, *sorted(c.tool_call_id for c in paused)])
    return str(uuid.uuid5(EVENT_IDS, key))


def payload_of(turn: TurnRecord, event: WebhookEvent, paused: list[PausedCall]) -> WebhookPayload:
    parts = parts_of(turn.message)
    answer = last_step_text(parts) or joined_text(parts)
    return WebhookPayload(
        type=event,
        id=event_id(turn.id, event, paused),
        tenant=turn.tenant,
        agent=turn.agent,
        conversation_id=turn.conversation_id,
        turn_id=turn.id,
        status=turn.status,
        text=answer or None,
        error=turn.error if event == "turn.error" else None,
        output=turn.output,
        paused=paused,
        channel=turn.request.channel,
        created_at=turn.created_at,
        ended_at=turn.completed_at if event != "turn.paused" else None,
    )


def signed_body(payload: dict[str, Any], *, sent_at: str, attempt: int) -> bytes:
    """The bytes one attempt sends: the payload with `sent_at` and `attempt`, compact JSON."""
    body = {**payload, "sent_at": sent_at, "attempt": attempt}
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()


def signature(body: bytes, secret: str) -> str:
    """`sha256=<hex HMAC-SHA256 of body>`, the `x-think-signature` header's value."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def verify_signature(body: bytes, secret: str, header: str) -> bool:
    """What a receiver checks (in constant time): `header` signs exactly `body`."""
    return hmac.compare_digest(signature(body, secret), header.strip())
