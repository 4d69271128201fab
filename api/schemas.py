"""Request and response bodies of the HTTP API (API.md), separate from storage records."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from think._messages import UIMessage

ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$"


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class CreateConversation(_Body):
    id: str | None = Field(default=None, pattern=ID_PATTERN)
    metadata: dict[str, Any] = Field(default_factory=dict)


class ConversationOut(BaseModel):
    id: str
    agent: str
    created_at: datetime
    active_leaf_id: str | None
    metadata: dict[str, Any]


class MessagesOut(BaseModel):
    messages: list[dict[str, Any]]


class ClientTool(_Body):
    name: str = Field(pattern=r"^[A-Za-z0-9_-]{1,64}$")
    description: str = ""
    input_schema: dict[str, Any] = Field(default_factory=lambda: {"type": "object"})


class SubmitTurnBody(_Body):
    input: str | UIMessage | list[UIMessage]
    mode: Literal["submit", "wait", "stream"] = "submit"
    parent_id: str | None = Field(default=None, min_length=1)
    body: dict[str, Any] = Field(default_factory=dict)
    client_tools: list[ClientTool] = Field(default_factory=list)
    wait_timeout: float | None = Field(default=None, gt=0, le=3600)

    @field_validator("input", mode="before")
    @classmethod
    def _input_not_empty(cls, value: Any) -> Any:
        if isinstance(value, str) and not value.strip():
            raise ValueError("input must not be empty")
        if isinstance(value, list) and not value:
            raise ValueError("input must hold at least one message")
        return value

    def messages(self) -> list[UIMessage]:
        if isinstance(self.input, str):
            return [UIMessage.user_text(self.input)]
        if isinstance(self.input, UIMessage):
            return [self.input]
        return list(self.input)

    def fingerprint(self) -> dict[str, Any]:
        """What an idempotent retry must repeat exactly (the mode may differ)."""
        return self.model_dump(mode="json", exclude={"mode", "wait_timeout"})


class PendingApproval(BaseModel):
    approval_id: str
    tool_call_id: str
    tool_name: str
    input: Any


class PendingClientTool(BaseModel):
    tool_call_id: str
    tool_name: str
    input: Any


class TurnOut(BaseModel):
    turn_id: str
    conversation_id: str
    agent: str
    status: str
    accepted: bool
    idempotency_key: str | None
    created_at: datetime
    started_at: datetime | None
    completed_at: datetime | None
    message_id: str | None
    message: dict[str, Any] | None
    error: str | None
    usage: dict[str, Any] = Field(default_factory=dict)
    pending_approvals: list[PendingApproval] = Field(default_factory=list)
    pending_client_tools: list[PendingClientTool] = Field(default_factory=list)
    stream_url: str
    status_url: str


class TurnsOut(BaseModel):
    turns: list[TurnOut]


class AgentTool(BaseModel):
    name: str
    description: str
    needs_approval: bool


class AgentOut(BaseModel):
    name: str
    description: str
    model: str
    tools: list[AgentTool]


class AgentsOut(BaseModel):
    agents: list[AgentOut]
