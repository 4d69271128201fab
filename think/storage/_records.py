"""What the storage package hands out: pydantic records, never ORM rows."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from think._messages import UIMessage

TurnStatus = Literal[
    "pending",
    "running",
    "awaiting_approval",
    "awaiting_client_tool",
    "completed",
    "error",
    "aborted",
    "skipped",
    "interrupted",
]
TERMINAL_STATUSES: frozenset[str] = frozenset(
    {"completed", "error", "aborted", "skipped", "interrupted"}
)
PAUSED_STATUSES: frozenset[str] = frozenset({"awaiting_approval", "awaiting_client_tool"})


class Conversation(BaseModel):
    uid: str
    tenant: str
    agent: str
    id: str
    created_at: datetime
    active_leaf_id: str | None
    metadata: dict[str, Any]


class TurnRequest(BaseModel):
    """The durable part of a submission: what the turn will append and run with."""

    messages: list[UIMessage]
    parent_id: str | None = None
    body: dict[str, Any] = Field(default_factory=dict)
    client_tools: list[dict[str, Any]] = Field(default_factory=list)


class TurnRecord(BaseModel):
    id: str
    conversation_uid: str
    conversation_id: str
    tenant: str
    agent: str
    idempotency_key: str | None
    request_hash: str
    request: TurnRequest
    status: TurnStatus
    created_at: datetime
    started_at: datetime | None
    completed_at: datetime | None
    message_id: str
    parent_id: str | None
    message: dict[str, Any] | None
    error: str | None
    steps_done: int
    usage: dict[str, Any]
    config: dict[str, Any] | None = None
    output: Any = None

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL_STATUSES


class Admission(BaseModel):
    """The outcome of submitting a turn: the record, and whether this request created it."""

    turn: TurnRecord
    accepted: bool
