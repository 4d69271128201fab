"""Folds UI message stream chunks into the UIMessage they describe.

This is the Python twin of the AI SDK's client-side stream processing. Every chunk a turn emits
goes through `MessageBuilder.apply` before it is written, and the message we store is the
builder's result, so the stored message equals what a `useChat` client reconstructs from the
same stream by construction (a Node conformance test checks it against the real `ai` package).
"""

from __future__ import annotations

import copy
from typing import Any, Never

from think._protocol import (
    DataChunk,
    DataUIPart,
    FileUIPart,
    ReasoningDeltaChunk,
    ReasoningEndChunk,
    ReasoningUIPart,
    TextDeltaChunk,
    TextEndChunk,
    TextUIPart,
    ToolApproval,
    ToolApprovalRequestChunk,
    ToolCallPart,
    ToolInputAvailableChunk,
    ToolInputErrorChunk,
    ToolUIPart,
    UIMessageChunk,
    UIMessageJSON,
    UIMessagePart,
    approval_part,
    data_part,
    is_data_chunk,
    is_step_start,
    tool_part,
    tool_part_type,
)


class MessageBuilder:
    def __init__(self, message: UIMessageJSON | None = None) -> None:
        self.message: UIMessageJSON = (
            copy.deepcopy(message) if message else {"id": "", "role": "assistant", "parts": []}
        )
        self._text: dict[str, TextUIPart] = {}
        self._reasoning: dict[str, ReasoningUIPart] = {}

    @property
    def parts(self) -> list[UIMessagePart]:
        return self.message["parts"]

    def open_text_ids(self) -> list[str]:
        """The ids of text parts started and not ended (a stream cut off mid-part)."""
        return list(self._text)

    def open_reasoning_ids(self) -> list[str]:
        """The ids of reasoning parts started and not ended."""
        return list(self._reasoning)

    def tool_part(self, tool_call_id: str) -> ToolCallPart | None:
        return tool_part(self.parts, tool_call_id)

    def apply(self, chunk: UIMessageChunk) -> None:
        """Fold one chunk in: the typed chunks the activities make and the chunks the stream
        log reads back alike (JSON objects of the same shape)."""
        if is_data_chunk(chunk):
            if not chunk.get("transient"):
                self._apply_data(chunk)
            return
        match chunk["type"]:
            case "start":
                if chunk.get("messageId"):
                    self.message["id"] = chunk["messageId"]
                self._merge_metadata(chunk.get("messageMetadata"))
            case "start-step":
                self.parts.append({"type": "step-start"})
            case "finish-step":
                self._text.clear()
                self._reasoning.clear()
            case "text-start":
                text: TextUIPart = {"type": "text", "text": "", "state": "streaming"}
                if chunk.get("providerMetadata") is not None:
                    text["providerMetadata"] = chunk["providerMetadata"]
                self._text[chunk["id"]] = text
                self.parts.append(text)
            case "reasoning-start":
                # The AI SDK keeps the chunk id on reasoning parts, not on text parts.
                reasoning: ReasoningUIPart = {
                    "type": "reasoning",
                    "id": chunk["id"],
                    "text": "",
                    "state": "streaming",
                }
                if chunk.get("providerMetadata") is not None:
                    reasoning["providerMetadata"] = chunk["providerMetadata"]
                self._reasoning[chunk["id"]] = reasoning
                self.parts.append(reasoning)
            case "text-delta":
                _grow(self._text[chunk["id"]], chunk)
            case "reasoning-delta":
                _grow(self._reasoning[chunk["id"]], chunk)
            case "text-end":
                _end(self._text.pop(chunk["id"]), chunk)
            case "reasoning-end":
                _end(self._reasoning.pop(chunk["id"]), chunk)
            case "tool-input-start":
                started: ToolUIPart = {
                    "type": tool_part_type(chunk["toolName"]),
                    "toolCallId": chunk["toolCallId"],
                    "state": "input-streaming",
                }
                self.parts.append(started)
            case "tool-input-delta":
                # The AI SDK's client keeps the partial text to show it parsed as it streams; a
                # stored message holds the input only once it is whole (`tool-input-available`).
                # Kept here, it was a second copy of every call's arguments for the step's
                # length, grown by `+=` (a copy of the whole string per delta).
                pass
            case "tool-input-available":
                call = self._tool_or_new(chunk)
                call["state"] = "input-available"
                call["input"] = chunk["input"]
            case "tool-input-error":
                call = self._tool_or_new(chunk)
                call["state"] = "output-error"
                call["input"] = chunk.get("input")
                call["errorText"] = chunk["errorText"]
            case "reset-step":
                # Drop the interrupted attempt's partial step; its step-start part stays.
                starts = [i for i, p in enumerate(self.parts) if is_step_start(p)]
                del self.parts[starts[-1] + 1 if starts else 0 :]
                self._text.clear()
                self._reasoning.clear()
            case "tool-output-available":
                call = self._require_tool(chunk["toolCallId"])
                call["state"] = "output-available"
                call["output"] = chunk["output"]
                call.pop("errorText", None)
            case "tool-output-error":
                call = self._require_tool(chunk["toolCallId"])
                call["state"] = "output-error"
                call.pop("output", None)
                call["errorText"] = chunk["errorText"]
            case "tool-approval-request":
                call = self._require_tool(chunk["toolCallId"])
                call["state"] = "approval-requested"
                call["approval"] = _requested_approval(chunk)
            case "tool-approval-response":
                call = self._require_approval(chunk["approvalId"])
                call["state"] = "approval-responded"
                answered: ToolApproval = {**call["approval"], "approved": chunk["approved"]}
                if chunk.get("reason") is not None:
                    answered["reason"] = chunk["reason"]
                call["approval"] = answered
            case "tool-output-denied":
                self._require_tool(chunk["toolCallId"])["state"] = "output-denied"
            case "finish" | "message-metadata":
                self._merge_metadata(chunk.get("messageMetadata"))
            case "file":
                # As the AI SDK's client keeps it: a file of the answer (an action's reply
                # attachment, `attach_reply`) is a part of the stored message.
                file: FileUIPart = {
                    "type": "file",
                    "mediaType": chunk["mediaType"],
                    "url": chunk["url"],
                }
                if "providerMetadata" in chunk:
                    file["providerMetadata"] = chunk["providerMetadata"]
                self.parts.append(file)
            case "abort" | "error" | "custom" | "source-url" | "source-document" | "reasoning-file":
                pass  # as before: the stream carries them, the stored message does not
            case "steering-message":
                # As the AI SDK's client folds it: the user's words in the answer, where they
                # joined it (the transcript gives them to the model as a user message there).
                self.parts.append(
                    {"type": "steering-message", "id": chunk["id"], "parts": chunk["parts"]}
                )
            case _:
                _unknown(chunk)

    def _tool_or_new(self, chunk: ToolInputAvailableChunk | ToolInputErrorChunk) -> ToolCallPart:
        call = self.tool_part(chunk["toolCallId"])
        if call is None:
            new: ToolUIPart = {
                "type": tool_part_type(chunk["toolName"]),
                "toolCallId": chunk["toolCallId"],
            }  # type: ignore[typeddict-item]  # its `state` is set by the caller, next
            self.parts.append(new)
            return new
        return call

    def _require_approval(self, approval_id: str) -> ToolCallPart:
        call = approval_part(self.parts, approval_id)
        if call is None:
            raise ValueError(f"no approval request {approval_id!r} in the message")
        return call

    def _require_tool(self, tool_call_id: str) -> ToolCallPart:
        call = self.tool_part(tool_call_id)
        if call is None:
            raise ValueError(f"no tool call {tool_call_id!r} in the message")
        return call

    def _merge_metadata(self, metadata: Any) -> None:
        if metadata is not None:
            self.message["metadata"] = _deep_merge(self.message.get("metadata") or {}, metadata)

    def _apply_data(self, chunk: DataChunk) -> None:
        if chunk.get("id") is None:
            self.parts.append({"type": chunk["type"], "data": chunk.get("data")})
            return
        existing = data_part(self.parts, chunk["type"], chunk["id"])
        if existing is not None:
            existing["data"] = chunk.get("data")
            return
        part: DataUIPart = {"type": chunk["type"], "id": chunk["id"], "data": chunk.get("data")}
        self.parts.append(part)


def _unknown(chunk: Never) -> None:
    """A chunk of a type this protocol does not name: mypy proves no producer here makes one,
    and one read back from an older or newer stream log is passed over, as the SDK's client
    does, rather than failing the fold."""


def _grow(part: TextUIPart | ReasoningUIPart, chunk: TextDeltaChunk | ReasoningDeltaChunk) -> None:
    part["text"] += chunk["delta"]
    _provider_metadata(part, chunk.get("providerMetadata"))


def _end(part: TextUIPart | ReasoningUIPart, chunk: TextEndChunk | ReasoningEndChunk) -> None:
    part["state"] = "done"
    _provider_metadata(part, chunk.get("providerMetadata"))


def _provider_metadata(part: TextUIPart | ReasoningUIPart, metadata: Any) -> None:
    # The last non-null value wins, as in the SDK.
    if metadata is not None:
        part["providerMetadata"] = metadata


def _requested_approval(chunk: ToolApprovalRequestChunk) -> ToolApproval:
    """A tool part's `approval` as the request set it: its optional fields under the part's
    names, as the SDK keeps them (`approvalDescriptor` → `descriptor`, `reason` →
    `requestReason`); `inputSchemaInput` kept even when null."""
    approval: ToolApproval = {"id": chunk["approvalId"]}
    if chunk.get("approvalDescriptor") is not None:
        approval["descriptor"] = chunk["approvalDescriptor"]
    if "inputSchemaInput" in chunk:
        approval["inputSchemaInput"] = chunk["inputSchemaInput"]
    if chunk.get("reason") is not None:
        approval["requestReason"] = chunk["reason"]
    if chunk.get("signature") is not None:
        approval["signature"] = chunk["signature"]
    if chunk.get("isAutomatic") is True:
        approval["isAutomatic"] = True
    return approval


def _deep_merge(base: dict[str, Any], update: dict[str, Any]) -> dict[str, Any]:
    """Objects merge key by key; arrays and scalars replace (the SDK's metadata rule)."""
    merged = dict(base)
    for key, value in update.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged
