"""What an A2A message says: the words of a new turn, or the answer to a paused one.

A message's text parts are the turn's input; a data part (a JSON object) joins it as its
JSON text, so an agent reads structured input too. Files and URLs are refused
(`ContentTypeNotSupportedError`): the gateway's turns take text. A message sent into a task
that waits for a person answers it: the text `approve` or `deny` (`yes`/`no`, `approved`/
`denied` too, any case), or a data part `{"approved": true|false, "reason"?: str,
"approval_id"?: str}` (without `approval_id`: every pending approval of the task); a data
part `{"tool_call_id": str, "output": ...}` (or `"error": str`) answers a client tool call.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from a2a.types import Message, Part
from a2a.utils.errors import ContentTypeNotSupportedError, InvalidParamsError
from google.protobuf.json_format import MessageToDict

APPROVE_WORDS = frozenset({"approve", "approved", "yes", "y", "ok", "allow"})
DENY_WORDS = frozenset({"deny", "denied", "no", "n", "reject", "refuse"})


def _data(part: Part) -> Any:
    return MessageToDict(part.data)


def input_text(message: Message) -> str:
    """The turn's input: the text parts, and each data part as its JSON, one per line."""
    pieces: list[str] = []
    for part in message.parts:
        kind = part.WhichOneof("content")
        if kind == "text":
            pieces.append(part.text)
        elif kind == "data":
            pieces.append(json.dumps(_data(part), ensure_ascii=False))
        else:
            raise ContentTypeNotSupportedError(
                message=f"this agent takes text and data parts; a {kind} part is not supported"
            )
    text = "\n".join(p for p in pieces if p)
    if not text.strip():
        raise InvalidParamsError(message="the message has no text: give it a text part")
    return text


def idempotency_key(message_id: str) -> str:
    """The turn's idempotency key for an A2A message id: a resent message is the same turn.
    Hashed, because a message id may be any string and a key is printable ASCII."""
    return "a2a-" + hashlib.sha256(message_id.encode()).hexdigest()[:40]


def new_context_id(tenant: str, agent: str, message_id: str) -> str:
    """The conversation a message without a context id starts, named after the message, so
    that a resent first message finds the turn it started rather than a new conversation."""
    digest = hashlib.sha256(f"{tenant}\0{agent}\0{message_id}".encode()).hexdigest()
    return f"ctx-{digest[:32]}"


@dataclass(frozen=True)
class Decision:
    approved: bool
    reason: str | None = None
    approval_id: str | None = None


@dataclass(frozen=True)
class ToolResult:
    tool_call_id: str
    output: Any = None
    error: str | None = None


def answer(message: Message) -> Decision | ToolResult:
    """The answer a message gives to a paused task; InvalidParamsError when it gives none."""
    for part in message.parts:
        kind = part.WhichOneof("content")
        if kind == "data":
            data = _data(part)
            if isinstance(data, dict) and isinstance(data.get("approved"), bool):
                reason, approval_id = data.get("reason"), data.get("approval_id")
                return Decision(
                    approved=data["approved"],
                    reason=reason if isinstance(reason, str) else None,
                    approval_id=approval_id if isinstance(approval_id, str) else None,
                )
            if isinstance(data, dict) and isinstance(data.get("tool_call_id"), str):
                error = data.get("error")
                return ToolResult(
                    tool_call_id=data["tool_call_id"],
                    output=data.get("output"),
                    error=error if isinstance(error, str) else None,
                )
        elif kind == "text":
            word = part.text.strip().strip(".!").lower()
            if word in APPROVE_WORDS:
                return Decision(approved=True)
            if word in DENY_WORDS:
                return Decision(approved=False, reason=None)
    raise InvalidParamsError(
        message="this task waits for input: answer with the text approve or deny, a data part "
        '{"approved": true|false}, or for a client tool {"tool_call_id": ..., "output": ...}'
    )
