"""Folds UI message stream chunks into the UIMessage they describe.

This is the Python twin of the AI SDK's client-side stream processing. Every chunk a turn emits
goes through `MessageBuilder.apply` before it is written, and the message we store is the
builder's result, so the stored message equals what a `useChat` client reconstructs from the
same stream by construction (a Node conformance test checks it against the real `ai` package).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from think._protocol import tool_part_type


class MessageBuilder:
    def __init__(self, message: dict[str, Any] | None = None) -> None:
        self.message: dict[str, Any] = (
            copy.deepcopy(message) if message else {"id": "", "role": "assistant", "parts": []}
        )
        self._text: dict[str, dict[str, Any]] = {}
        self._reasoning: dict[str, dict[str, Any]] = {}

    @property
    def parts(self) -> list[dict[str, Any]]:
        parts: list[dict[str, Any]] = self.message["parts"]
        return parts

    def tool_part(self, tool_call_id: str) -> dict[str, Any] | None:
        for part in self.parts:
            if part.get("toolCallId") == tool_call_id:
                return part
        return None

    def apply(self, chunk: Mapping[str, Any]) -> None:
        """Fold one chunk in. Any mapping will do: the typed chunks the activities make
        (`UIMessageChunk`) and the plain dicts the stream log reads back alike."""
        kind = chunk["type"]
        if kind == "start":
            if chunk.get("messageId"):
                self.message["id"] = chunk["messageId"]
            self._merge_metadata(chunk)
        elif kind == "start-step":
            self.parts.append({"type": "step-start"})
        elif kind == "finish-step":
            self._text.clear()
            self._reasoning.clear()
        elif kind in ("text-start", "reasoning-start"):
            part: dict[str, Any] = {"type": kind.split("-")[0], "text": "", "state": "streaming"}
            if kind == "reasoning-start":
                # The AI SDK keeps the chunk id on reasoning parts, not on text parts.
                part = {"type": "reasoning", "id": chunk["id"], "text": "", "state": "streaming"}
            if chunk.get("providerMetadata") is not None:
                part["providerMetadata"] = chunk["providerMetadata"]
            (self._text if kind == "text-start" else self._reasoning)[chunk["id"]] = part
            self.parts.append(part)
        elif kind in ("text-delta", "reasoning-delta"):
            active = self._text if kind == "text-delta" else self._reasoning
            part = active[chunk["id"]]
            part["text"] += chunk["delta"]
            self._provider_metadata(part, chunk)
        elif kind in ("text-end", "reasoning-end"):
            active = self._text if kind == "text-end" else self._reasoning
            part = active.pop(chunk["id"])
            part["state"] = "done"
            self._provider_metadata(part, chunk)
        elif kind == "tool-input-start":
            self.parts.append(
                {
                    "type": tool_part_type(chunk["toolName"]),
                    "toolCallId": chunk["toolCallId"],
                    "state": "input-streaming",
                }
            )
        elif kind == "tool-input-delta":
            # The AI SDK's client keeps the partial text to show it parsed as it streams; a
            # stored message holds the input only once it is whole (`tool-input-available`).
            # Kept here, it was a second copy of every call's arguments for the step's length,
            # grown by `+=` (a copy of the whole string per delta).
            pass
        elif kind == "tool-input-available":
            part = self._tool_or_new(chunk)
            part["state"] = "input-available"
            part["input"] = chunk["input"]
        elif kind == "tool-input-error":
            part = self._tool_or_new(chunk)
            part["state"] = "output-error"
            part["input"] = chunk.get("input")
            part["errorText"] = chunk["errorText"]
        elif kind == "reset-step":
            # Drop the interrupted attempt's partial step; its step-start part stays.
            starts = [i for i, p in enumerate(self.parts) if p.get("type") == "step-start"]
            del self.parts[starts[-1] + 1 if starts else 0 :]
            self._text.clear()
            self._reasoning.clear()
        elif kind == "tool-output-available":
            part = self._require_tool(chunk["toolCallId"])
            part["state"] = "output-available"
            part["output"] = chunk["output"]
            part.pop("errorText", None)
        elif kind == "tool-output-error":
            part = self._require_tool(chunk["toolCallId"])
            part["state"] = "output-error"
            part.pop("output", None)
            part["errorText"] = chunk["errorText"]
        elif kind == "tool-approval-request":
            part = self._require_tool(chunk["toolCallId"])
            part["state"] = "approval-requested"
            approval: dict[str, Any] = {"id": chunk["approvalId"]}
            for key, name in _APPROVAL_KEYS:
                if key in chunk and (key == "inputSchemaInput" or chunk[key] is not None):
                    approval[name] = chunk[key]
            if chunk.get("isAutomatic") is True:
                approval["isAutomatic"] = True
            part["approval"] = approval
        elif kind == "tool-approval-response":
            part = self._approval_part(chunk["approvalId"])
            part["state"] = "approval-responded"
            part["approval"] = {**part.get("approval", {}), "approved": chunk["approved"]}
            if chunk.get("reason") is not None:
                part["approval"]["reason"] = chunk["reason"]
        elif kind == "tool-output-denied":
            self._require_tool(chunk["toolCallId"])["state"] = "output-denied"
        elif kind in ("finish", "message-metadata"):
            self._merge_metadata(chunk)
        elif kind.startswith("data-") and not chunk.get("transient"):
            self._apply_data(chunk)

    def _tool_or_new(self, chunk: Mapping[str, Any]) -> dict[str, Any]:
        part = self.tool_part(chunk["toolCallId"])
        if part is None:
            part = {"type": tool_part_type(chunk["toolName"]), "toolCallId": chunk["toolCallId"]}
            self.parts.append(part)
        return part

    def _approval_part(self, approval_id: str) -> dict[str, Any]:
        for part in self.parts:
            if (part.get("approval") or {}).get("id") == approval_id:
                return part
        raise ValueError(f"no approval request {approval_id!r} in the message")

    def _require_tool(self, tool_call_id: str) -> dict[str, Any]:
        part = self.tool_part(tool_call_id)
        if part is None:
            raise ValueError(f"no tool call {tool_call_id!r} in the message")
        return part

    @staticmethod
    def _provider_metadata(part: dict[str, Any], chunk: Mapping[str, Any]) -> None:
        # The last non-null value wins, as in the SDK.
        if chunk.get("providerMetadata") is not None:
            part["providerMetadata"] = chunk["providerMetadata"]

    def _merge_metadata(self, chunk: Mapping[str, Any]) -> None:
        if chunk.get("messageMetadata") is not None:
            self.message["metadata"] = _deep_merge(
                self.message.get("metadata") or {}, chunk["messageMetadata"]
            )

    def _apply_data(self, chunk: Mapping[str, Any]) -> None:
        part = {"type": chunk["type"], "data": chunk.get("data")}
        if chunk.get("id") is not None:
            part = {"type": chunk["type"], "id": chunk["id"], "data": chunk.get("data")}
            for existing in self.parts:
                if existing.get("type") == chunk["type"] and existing.get("id") == chunk["id"]:
                    existing["data"] = chunk.get("data")
                    return
        self.parts.append(part)


# Optional `tool-approval-request` fields and their names on the part's `approval` object.
_APPROVAL_KEYS = (
    ("approvalDescriptor", "descriptor"),
    ("inputSchemaInput", "inputSchemaInput"),
    ("reason", "requestReason"),
    ("signature", "signature"),
)


def _deep_merge(base: dict[str, Any], update: dict[str, Any]) -> dict[str, Any]:
    """Objects merge key by key; arrays and scalars replace (the SDK's metadata rule)."""
    merged = dict(base)
    for key, value in update.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged
