"""A reply as its turn's stream builds it: the text so far (a step the engine discarded with
`reset-step` taken back out), the tool calls waiting for a person, and how the stream ended.
Read by the delivery loop, which decides what to post; nothing here does I/O."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from think.streaming import UIMessageChunk


@dataclass
class ApprovalAsk:
    approval_id: str
    tool_call_id: str
    tool_name: str
    input: Any


@dataclass
class ReplyDraft:
    text: str = ""
    step_start: int = 0
    ended: str | None = None
    """`finish`, `error` or `abort` once the stream ended."""
    error: str | None = None
    asks: list[ApprovalAsk] = field(default_factory=list)
    _calls: dict[str, tuple[str, Any]] = field(default_factory=dict)

    def take(self, chunk: UIMessageChunk) -> None:
        raw: dict[str, Any] = dict(chunk)
        kind = raw.get("type")
        if kind == "start-step":
            self.step_start = len(self.text)
        elif kind == "reset-step":
            self.text = self.text[: self.step_start]
        elif kind == "text-delta":
            self.text += str(raw.get("delta", ""))
        elif kind == "text-start" and self.text.strip() and not self.text.endswith("\n\n"):
            self.text = self.text.rstrip() + "\n\n"
        elif kind in ("tool-input-available", "tool-input-start"):
            call = str(raw.get("toolCallId", ""))
            name = str(raw.get("toolName", self._calls.get(call, ("tool", None))[0]))
            self._calls[call] = (name, raw.get("input"))
        elif kind == "tool-approval-request":
            call = str(raw.get("toolCallId", ""))
            name, arguments = self._calls.get(call, ("tool", None))
            self.asks.append(ApprovalAsk(str(raw.get("approvalId", "")), call, name, arguments))
        elif kind == "tool-output-available":
            # A parked action (`approval="durable_pause"`): the turn goes on without it, and
            # its decision is taken later, from the same buttons.
            output = raw.get("output")
            if isinstance(output, dict) and output.get("status") == "awaiting_approval":
                call = str(raw.get("toolCallId", ""))
                name, arguments = self._calls.get(call, ("tool", None))
                approval = str(output.get("approval_id", ""))
                if approval:
                    self.asks.append(ApprovalAsk(approval, call, name, arguments))
        elif kind in ("finish", "error", "abort"):
            self.ended = kind
            if kind == "error":
                self.error = str(raw.get("errorText", "error"))


def approval_text(ask: ApprovalAsk) -> str:
    """The markdown posted with an approval's buttons: the tool and its input."""
    shown = json.dumps(ask.input, indent=2, ensure_ascii=False, default=str)
    if len(shown) > 3000:
        shown = shown[:3000] + "\n…"
    return f"**Approval needed**: `{ask.tool_name}`\n```json\n{shown}\n```"


def message_text(message: Mapping[str, Any] | None) -> str:
    """The text parts of a stored assistant message, joined (a stream already pruned)."""
    if not message:
        return ""
    texts = [
        str(p.get("text", ""))
        for p in message.get("parts", [])
        if isinstance(p, dict) and p.get("type") == "text"
    ]
    return "\n\n".join(t for t in texts if t.strip())
