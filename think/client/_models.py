"""What the gateway answers, as pydantic models (API.md).

Every model tolerates fields it does not know, so an older client keeps working against a
newer gateway; unknown fields stay readable through `model_extra`.
"""

from __future__ import annotations

import secrets
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from think._messages import Parts, UIMessage
from think._protocol import joined_text

TERMINAL_STATUSES = frozenset({"completed", "error", "aborted", "skipped", "interrupted"})
PAUSED_STATUSES = frozenset({"awaiting_approval", "awaiting_client_tool"})


def new_idempotency_key() -> str:
    """A fresh `Idempotency-Key`: send it with a submission, and retry with the same one, so
    the turn runs once however many times the request is sent."""
    return f"idem_{secrets.token_hex(16)}"


class _Answer(BaseModel):
    model_config = ConfigDict(extra="allow")


class Message(UIMessage):
    """A UIMessage as the gateway returns it (`think.UIMessage`, read tolerantly): fields a newer
    gateway adds are dropped, and a message with no parts yet is accepted."""

    model_config = ConfigDict(extra="ignore")

    parts: Parts = Field(default_factory=list)

    @property
    def text(self) -> str:
        """The message's text parts, joined."""
        return joined_text(self.parts)


class AgentTool(_Answer):
    name: str
    description: str = ""
    needs_approval: bool = False


class Agent(_Answer):
    name: str
    description: str = ""
    model: str = ""
    tools: list[AgentTool] = Field(default_factory=list)


class Conversation(_Answer):
    id: str
    agent: str
    created_at: datetime
    active_leaf_id: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


class SearchHit(_Answer):
    message_id: str
    role: str
    snippet: str
    rank: float


class WorkspaceFile(_Answer):
    """A file of a conversation's workspace, without its content."""

    path: str
    size: int
    media_type: str
    updated_at: datetime


class PendingApproval(_Answer):
    approval_id: str
    tool_call_id: str
    tool_name: str
    input: Any = None


class PendingClientTool(_Answer):
    tool_call_id: str
    tool_name: str
    input: Any = None


class QueuedBehind(_Answer):
    """The turn a waited-for turn cannot start before: one paused for a person."""

    turn_id: str
    status: str
    """awaiting_approval or awaiting_client_tool."""
    status_url: str


class ClientTool(BaseModel):
    """A tool the caller runs itself: the turn pauses (`awaiting_client_tool`) until
    `submit_tool_result` brings its output."""

    name: str
    description: str = ""
    input_schema: dict[str, Any] = Field(default_factory=lambda: {"type": "object"})


class Turn(_Answer):
    turn_id: str
    conversation_id: str
    agent: str
    status: str
    """pending, running, awaiting_approval, awaiting_client_tool, completed, error, aborted,
    skipped or interrupted."""
    accepted: bool = True
    """False when this request did not create the turn: its Idempotency-Key had been seen
    (possibly by an earlier attempt of the same call, retried after a dropped connection)."""
    idempotency_key: str | None = None
    created_at: datetime
    started_at: datetime | None = None
    completed_at: datetime | None = None
    message_id: str | None = None
    """The assistant message's id, once the turn has started."""
    message: Message | None = None
    """The answer so far: in wait mode, and from `get_turn` once the turn has ended or paused."""
    error: str | None = None
    usage: dict[str, Any] = Field(default_factory=dict)
    pending_approvals: list[PendingApproval] = Field(default_factory=list)
    pending_client_tools: list[PendingClientTool] = Field(default_factory=list)
    queued_behind: QueuedBehind | None = None
    """Wait mode: the turn is still pending because the turn ahead of it waits for a person;
    the wait answered at once. Decide that turn, then wait for this one again."""
    stream_url: str
    status_url: str

    @property
    def terminal(self) -> bool:
        """The turn has ended and will not change any more."""
        return self.status in TERMINAL_STATUSES

    @property
    def paused(self) -> bool:
        """The turn waits for a person: an approval or a client tool's result."""
        return self.status in PAUSED_STATUSES

    @property
    def text(self) -> str:
        """The answer's text ("" while there is no message)."""
        return self.message.text if self.message else ""


class StreamChunk(dict[str, Any]):
    """One UIMessageChunk, the JSON object exactly as the AI SDK defines it, plus the SSE id
    (`event_id`, the chunk's sequence number in its turn) it arrived with.

    A plain `dict` in every other respect: `chunk["type"]`, `chunk == {...}`, `json.dumps`.
    """

    __slots__ = ("event_id",)

    def __init__(self, chunk: dict[str, Any], event_id: int | None) -> None:
        super().__init__(chunk)
        self.event_id = event_id

    @property
    def type(self) -> str:
        return str(self.get("type", ""))
