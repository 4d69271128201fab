"""What code may pass as a turn's input to the Python turn API, and how it becomes what
admission takes: the messages to append, the input as HTTP's body would carry it (so that
the idempotency fingerprint is the same from either door) and the client tools' specs.

Refusals happen here, as `UserError`, before anything is stored.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeAlias

from pydantic import ValidationError

from think._messages import UIMessage
from think.exceptions import UserError

MessageLike: TypeAlias = UIMessage | dict[str, Any]
TurnInput: TypeAlias = str | MessageLike | Sequence[MessageLike]
"""A string (one user message), a UIMessage (or its dict form), or a list of them."""
MessagesFunction: TypeAlias = Callable[
    [list[UIMessage]], Sequence[MessageLike] | Awaitable[Sequence[MessageLike]]
]
"""`(current messages) -> messages`, evaluated at admission (wait and stream modes): return
the new messages, or the current ones followed by the new ones."""


def messages_of(value: TurnInput) -> list[UIMessage]:
    """Messages from a string, a message or a list of them; empty input is refused here,
    before anything is stored."""
    if isinstance(value, str):
        if not value.strip():
            raise UserError("input must not be empty")
        return [UIMessage.user_text(value)]
    items: Sequence[MessageLike] = [value] if isinstance(value, UIMessage | dict) else value
    if not items:
        raise UserError("input must hold at least one message")
    out = []
    for i, item in enumerate(items):
        try:
            out.append(item if isinstance(item, UIMessage) else UIMessage.model_validate(item))
        except ValidationError as exc:
            raise UserError(f"input message {i} is not a UIMessage: {exc}") from None
    return out


def input_json(value: TurnInput, messages: list[UIMessage]) -> Any:
    """The input as HTTP's body would carry it, for the fingerprint: the string itself, one
    message's JSON, or a list of them."""
    if isinstance(value, str):
        return value
    dumped = [m.model_dump(mode="json") for m in messages]
    return dumped[0] if isinstance(value, UIMessage | dict) else dumped


def client_tool_spec(tool: dict[str, Any]) -> dict[str, Any]:
    """A client tool as the turn records it (and HTTP's `ClientTool` dumps it)."""
    if not isinstance(tool.get("name"), str):
        raise UserError(f"a client tool needs a name: {tool!r}")
    return {
        "name": tool["name"],
        "description": str(tool.get("description") or ""),
        "input_schema": tool.get("input_schema") or {"type": "object"},
    }
