"""The AI SDK's chat transports over the one front door: what `POST /v1/agents/{agent}/chat`
reads from useChat's body, and how it checks that body against the stored conversation.

useChat sends its whole transcript with every request; the server owns the history, so it
takes from the transcript only what is new (the last user message, or the approvals a person
gave in the last assistant message) and checks the rest against the stored branch: a client
that holds other messages than the server (another tab's edit, a stale cache, a forged body)
is told so with a 409 rather than having its words answered in a context it does not see.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from api.errors import Problem
from api.schemas import ID_PATTERN, ClientTool
from think.server import UIMessage

__all__ = [
    "ChatBody",
    "ChatMessage",
    "ChatRequest",
    "Decision",
    "ToolOutput",
    "check_transcript",
    "decisions",
    "idempotency_key",
    "text_of",
    "tool_outputs",
]

Trigger = Literal["submit-message", "regenerate-message"]


class ChatMessage(BaseModel):
    """A UIMessage as useChat holds it. Its parts are read only where the route needs them
    (the new user message's, an approval's), so a part type this version does not know is
    no reason to refuse the request."""

    model_config = ConfigDict(extra="ignore")

    id: str = Field(min_length=1, max_length=200, pattern=r"^[^\x00]+$")
    role: Literal["system", "user", "assistant"]
    parts: list[dict[str, Any]]
    metadata: Any = None


class ChatBody(BaseModel):
    """The default transport's body (`DefaultChatTransport`): the chat's id, its messages,
    what to do with them. Fields added by `body` options of useChat are ignored."""

    model_config = ConfigDict(extra="ignore")

    id: str = Field(
        pattern=ID_PATTERN,
        description="The conversation id (created if new), scoped to the caller's tenant",
    )
    messages: list[ChatMessage] = Field(min_length=1)
    trigger: Trigger = Field(
        default="submit-message",
        description="submit-message: answer the new user message (or go on after approvals); "
        "regenerate-message: a new answer to the last user message",
    )
    messageId: str | None = Field(
        default=None,
        min_length=1,
        max_length=200,
        pattern=r"^[^\x00]+$",
        description="regenerate-message: the assistant message to answer again",
    )
    client_tools: list[ClientTool] = Field(
        default_factory=list,
        description="Tools the client runs (useChat's `addToolOutput`), as a turn's "
        "`client_tools`; sent with useChat's `body` option",
    )


@dataclass(frozen=True)
class Decision:
    """An approval a person gave in useChat (`addToolApprovalResponse`)."""

    approval_id: str
    approved: bool
    reason: str | None


@dataclass(frozen=True)
class ToolOutput:
    """A client tool's result given in useChat (`addToolOutput`): an output or an error."""

    tool_call_id: str
    output: Any = None
    error: str | None = None


@dataclass(frozen=True)
class ChatRequest:
    """What a chat body asks for, once checked: a new user message, the decisions in the
    last assistant message, or a regenerate of `regenerate_id`."""

    new_message: UIMessage | None = None
    decisions: tuple[Decision, ...] = ()
    outputs: tuple[ToolOutput, ...] = ()
    continued_id: str | None = None
    regenerate_id: str | None = None


def text_of(parts: Sequence[Mapping[str, Any]]) -> str:
    """A message's words: its text parts, joined."""
    return "".join(str(p.get("text", "")) for p in parts if p.get("type") == "text")


def _contradiction(index: int, why: str) -> Problem:
    return Problem(
        409,
        f"messages.{index} {why}: the conversation's stored messages differ from the client's; "
        "reload the conversation (GET …/conversations/{cid}/messages) and send again",
        errors=[{"field": f"messages.{index}", "message": why}],
    )


def _same(index: int, sent: ChatMessage, stored: UIMessage) -> None:
    if sent.id != stored.id:
        raise _contradiction(index, f"is {sent.id!r} where the conversation has {stored.id!r}")
    if sent.role != stored.role:
        raise _contradiction(index, f"has role {sent.role!r}, stored as {stored.role!r}")
    # An assistant message a client stopped holds less than the stored one (or more, when the
    # worker had not stored the last words yet): the stream, not the client, is its source.
    if sent.role != "assistant" and text_of(sent.parts) != text_of(stored.parts):
        raise _contradiction(index, "has other text than the stored message")


def check_transcript(body: ChatBody, stored: Sequence[UIMessage]) -> ChatRequest:
    """What `body` asks for, given the conversation's active branch `stored`; a 409 when the
    messages it sends before the new one are not a prefix of `stored`."""
    sent = body.messages
    last = sent[-1]
    if body.trigger == "regenerate-message":
        return _regenerate(body, stored)
    if last.role == "assistant":
        # The answer of a paused turn is stored once the turn goes on: the route checks that
        # it is the paused turn's message.
        for i, message in enumerate(sent[:-1]):
            if i >= len(stored):
                raise _contradiction(i, "is not in the conversation")
            _same(i, message, stored[i])
        if len(sent) - 1 < len(stored):
            _same(len(sent) - 1, last, stored[len(sent) - 1])
        return ChatRequest(
            decisions=decisions(last), outputs=tool_outputs(last), continued_id=last.id
        )
    if last.role != "user":
        raise _unanswerable(len(sent) - 1, "role", "is not a user message: nothing to answer")
    before = sent[:-1]
    for i, message in enumerate(before):
        if i >= len(stored):
            raise _contradiction(i, "is not in the conversation")
        _same(i, message, stored[i])
    position = len(before)
    if position < len(stored) and stored[position].id == last.id:
        _same(position, last, stored[position])  # a resend: the same message, the same turn
    if not any(p.get("type") in ("text", "file") for p in last.parts):
        raise _unanswerable(position, "parts", "has no text or file part: nothing to answer")
    try:
        new = UIMessage(id=last.id, role="user", parts=last.parts)
    except ValueError as exc:
        raise _unanswerable(position, "parts", f"is not a message a turn can take: {exc}") from exc
    return ChatRequest(new_message=new)


def _unanswerable(index: int, field: str, why: str) -> Problem:
    """A transcript the schema allows whose last message the route cannot answer: a 409 (the
    request conflicts with what a turn can take), as the OpenAPI document says, rather than a
    422, which the document keeps for bodies that are not the transport's."""
    return Problem(
        409,
        f"messages.{index} {why}",
        errors=[{"field": f"messages.{index}.{field}", "message": why}],
    )


def _regenerate(body: ChatBody, stored: Sequence[UIMessage]) -> ChatRequest:
    """useChat drops the answer it regenerates and sends what came before it; the answer is
    `messageId` when given, else the stored message after the ones sent."""
    sent = body.messages
    for i, message in enumerate(sent):
        if i >= len(stored):
            raise _contradiction(i, "is not in the conversation")
        _same(i, message, stored[i])
    target = body.messageId
    if target is None:
        after = stored[len(sent)] if len(sent) < len(stored) else None
        if after is None or after.role != "assistant":
            raise Problem(
                409,
                "there is no answer after the messages sent to regenerate",
                errors=[{"field": "messages", "message": "no assistant message follows"}],
            )
        target = after.id
    return ChatRequest(regenerate_id=target)


def decisions(message: ChatMessage) -> tuple[Decision, ...]:
    """The approvals a person gave in useChat: tool parts in `approval-responded`."""
    found: list[Decision] = []
    for part in message.parts:
        approval = part.get("approval")
        if part.get("state") != "approval-responded" or not isinstance(approval, dict):
            continue
        approval_id, approved = approval.get("id"), approval.get("approved")
        reason = approval.get("reason")
        if isinstance(approval_id, str) and isinstance(approved, bool):
            found.append(
                Decision(approval_id, approved, reason if isinstance(reason, str) else None)
            )
    return tuple(found)


def tool_outputs(message: ChatMessage) -> tuple[ToolOutput, ...]:
    """The results the client gave its tool calls: tool parts in `output-available` or
    `output-error` (the route sends only those of calls the turn waits on a client for)."""
    found: list[ToolOutput] = []
    for part in message.parts:
        call = part.get("toolCallId")
        if not isinstance(call, str):
            continue
        if part.get("state") == "output-available":
            found.append(ToolOutput(call, output=part.get("output")))
        elif part.get("state") == "output-error":
            found.append(ToolOutput(call, error=str(part.get("errorText") or "failed")))
    return tuple(found)


def idempotency_key(message: UIMessage) -> str:
    """The key a new user message is admitted under: its id, so a resent POST (the same
    message) is the same turn. An id that is not printable ASCII (a key's alphabet) is keyed
    by its SHA-256."""
    if all(" " <= c <= "~" for c in message.id):
        return f"chat:{message.id}"
    return f"chat:sha256:{hashlib.sha256(message.id.encode()).hexdigest()}"
