"""Model events to UI message chunks, keeping the stored message and the stream in lockstep."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any, Literal

from think._messages import storable, storable_text
from think._protocol import (
    ReasoningDeltaChunk,
    ReasoningEndChunk,
    TextEndChunk,
    UIMessageChunk,
    chunk_kind,
    is_reasoning_chunk,
    last_step_text,
)
from think.streaming import ChunkWriter, MessageBuilder
from think.workflows.inputs import ToolCallRef

log = logging.getLogger("think.engine.activities")

MAX_STREAMED_TOOL_INPUT = 64 * 1024
"""Characters of a tool call's arguments sent as `tool-input-delta` chunks; past them the
call's input reaches the stream only whole, in its `tool-input-available` chunk. Without the
bound a large call (a 14 MiB `write`) went to the stream log, every SSE client and the gateway
twice: once in pieces, once whole (2.06x its content, docs/benchmarks.md). A client shows the
first 64 KiB as they come, then the input: what a person can read of it while it streams."""


class StepStream:
    """Turns model events into UI message chunks, keeping builder and stream in lockstep.

    Every model's words enter the turn here, whatever the client: each delta, tool name and
    call id is made storable (`think._messages.storable`: NUL and lone surrogates replaced)
    before the builder or the stream sees it, and so are the decoded arguments (a `\\u0000`
    escape in the JSON text decodes to a NUL). The stored message, the stream and what later
    steps show the model are then the same text, and Postgres never refuses it."""

    def __init__(
        self,
        builder: MessageBuilder,
        writer: ChunkWriter,
        step: int,
        *,
        send_reasoning: bool = True,
        on_chunk: Callable[[UIMessageChunk], object] | None = None,
        answer_tool: str | None = None,
    ) -> None:
        self.builder = builder
        self.writer = writer
        self.step = step
        self.send_reasoning = send_reasoning
        self.on_chunk = on_chunk
        self._open: tuple[Literal["text", "reasoning"], str] | None = None  # (kind, part id)
        self._count = 0
        self._calls: dict[str, tuple[str, list[str]]] = {}
        self._streamed: dict[str, int] = {}
        """Characters of each call's arguments sent as deltas so far."""
        self.answer_tool = answer_tool
        """The internal final-answer tool of structured output on a model without a native
        mode: its call becomes the answer's text and never appears as a tool call."""
        self._answer: list[str] | None = None
        self._hidden = ""

    def emit(self, chunk: UIMessageChunk) -> None:
        self.builder.apply(chunk)
        if self.send_reasoning or not is_reasoning_chunk(chunk):
            # Reasoning kept from clients is still stored: the builder saw it.
            self.writer.emit(chunk)
        self._tell(chunk)

    def announce(self, chunk: UIMessageChunk) -> None:
        """`emit` for a chunk the builder has applied already (the step's start and the
        steering messages it delivers, which its request was built with)."""
        self.writer.emit(chunk)
        self._tell(chunk)

    def _tell(self, chunk: UIMessageChunk) -> None:
        if self.on_chunk is not None:
            try:
                self.on_chunk(chunk)
            except Exception:
                log.warning("on_chunk failed on a %s chunk", chunk_kind(chunk), exc_info=True)

    def _switch(self, kind: Literal["text", "reasoning"] | None) -> str:
        """Close the open text or reasoning part unless it is of `kind`, open one of `kind`
        unless one is open; the id of the part of `kind` (`""` when `kind` is None)."""
        if self._open and self._open[0] != kind:
            self.emit(_end(*self._open))
            self._open = None
        if kind is None:
            return ""
        if not self._open:
            self._count += 1
            part_id = f"{kind[0]}{self.step}-{self._count}"
            self._open = (kind, part_id)
            if kind == "text":
                self.emit({"type": "text-start", "id": part_id})
            else:
                self.emit({"type": "reasoning-start", "id": part_id})
        return self._open[1]

    def text(self, delta: str) -> None:
        delta = storable_text(delta)
        self.emit({"type": "text-delta", "id": self._switch("text"), "delta": delta})

    def reasoning(
        self, delta: str, provider_metadata: dict[str, dict[str, Any]] | None = None
    ) -> None:
        """`provider_metadata` (a thinking block's signature, a reasoning item's id) rides on
        the delta, as the AI SDK's does, and so lands on the stored reasoning part. It comes
        at the end of its block, so it closes the part: the next block's reasoning is a part
        of its own, handed back with its own metadata."""
        chunk: ReasoningDeltaChunk = {
            "type": "reasoning-delta",
            "id": self._switch("reasoning"),
            "delta": storable_text(delta),
        }
        if provider_metadata is not None:
            chunk["providerMetadata"] = storable(provider_metadata)
        self.emit(chunk)
        if provider_metadata is not None:
            self._switch(None)

    def tool_start(self, tool_call_id: str, tool_name: str) -> None:
        tool_call_id, tool_name = storable_text(tool_call_id), storable_text(tool_name)
        self._switch(None)
        if tool_name == self.answer_tool and self._answer is None:
            self._answer = []
            self._hidden = tool_call_id
            return
        self._calls[tool_call_id] = (tool_name, [])
        self.emit({"type": "tool-input-start", "toolCallId": tool_call_id, "toolName": tool_name})

    def tool_delta(self, tool_call_id: str, delta: str) -> None:
        tool_call_id, delta = storable_text(tool_call_id), storable_text(delta)
        if self._answer is not None and tool_call_id == self._hidden:
            self._answer.append(delta)
            return
        self._calls[tool_call_id][1].append(delta)
        streamed = self._streamed.get(tool_call_id, 0)
        if streamed >= MAX_STREAMED_TOOL_INPUT:
            return
        self._streamed[tool_call_id] = streamed + len(delta)
        self.emit({"type": "tool-input-delta", "toolCallId": tool_call_id, "inputTextDelta": delta})

    @property
    def has_output(self) -> bool:
        """Whether this step produced anything beyond its `step-start`."""
        return self._count > 0 or bool(self._calls)

    @property
    def partial_text(self) -> str:
        return last_step_text(self.builder.parts)

    def interrupt(self) -> list[UIMessageChunk]:
        """Close what is open (a text or reasoning part) and hand back the chunks that do so,
        applied to the message but not yet written, for the caller's final transaction."""
        if not self._open:
            return []
        chunk = _end(*self._open)
        self.builder.apply(chunk)
        self._open = None
        return [chunk] if self.send_reasoning or not is_reasoning_chunk(chunk) else []

    @property
    def called_tools(self) -> bool:
        return bool(self._calls)

    def close(self) -> list[ToolCallRef]:
        """Settle the step's tool inputs; the caller ends the step with `finish_step`, after
        it has planned the calls (approval requests belong inside the step)."""
        if self._answer is not None:
            # The final answer: streamed as the text it is, at once.
            self.text("".join(self._answer) or "{}")
        self._switch(None)
        refs: list[ToolCallRef] = []
        for call_id, (name, fragments) in self._calls.items():
            raw = "".join(fragments)
            try:
                value: Any = (
                    storable(json.loads(raw, parse_constant=_not_json)) if raw.strip() else {}
                )
            except ValueError as exc:  # JSONDecodeError, or `_not_json`
                # Settled as an error right here; the model reads it and can try again.
                self.emit(
                    {
                        "type": "tool-input-error",
                        "toolCallId": call_id,
                        "toolName": name,
                        "input": raw,
                        "errorText": f"the arguments are not valid JSON: {exc}",
                    }
                )
                continue
            self.emit(
                {
                    "type": "tool-input-available",
                    "toolCallId": call_id,
                    "toolName": name,
                    "input": value,
                }
            )
            refs.append(ToolCallRef(tool_call_id=call_id, tool_name=name))
        return refs

    def finish_step(self) -> None:
        self.emit({"type": "finish-step"})


def _end(kind: Literal["text", "reasoning"], part_id: str) -> TextEndChunk | ReasoningEndChunk:
    if kind == "text":
        return {"type": "text-end", "id": part_id}
    return {"type": "reasoning-end", "id": part_id}


def _not_json(constant: str) -> Any:
    """`NaN` and the infinities, which Python's parser takes but JSON (and Postgres's `jsonb`)
    does not: arguments holding one are refused like any other invalid JSON."""
    raise ValueError(f"{constant} is not a JSON number")
