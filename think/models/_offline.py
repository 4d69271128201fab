"""The model used when none is configured.

`think dev` must work on a fresh laptop with no credentials and no network, so that the whole
path (gateway, workflow, activities, streaming) can be tried before choosing a provider. The
reply says plainly what it is, so nobody mistakes it for a real model that answers badly.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from decimal import Decimal
from typing import Any

from think.models._base import (
    Finish,
    ModelEvent,
    ModelRequest,
    TextDelta,
    ToolCallDelta,
    ToolCallStart,
    Usage,
)

OFFLINE_NOTICE = (
    "This is Think's offline model: no model endpoint is configured "
    "(set OPENAI_BASE_URL and OPENAI_API_KEY to use a real one)."
)

_WORD = re.compile(r"\S+\s*|\s+")


def message_text(message: dict[str, Any]) -> str:
    """The text of a Chat Completions message, whether `content` is a string or a list of parts."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            part.get("text", "")
            for part in content
            if isinstance(part, dict) and part.get("type") == "text"
        )
    return ""


def last_user_text(messages: list[dict[str, Any]]) -> str:
    for message in reversed(messages):
        if message.get("role") == "user":
            return message_text(message)
    return ""


def word_chunks(text: str) -> list[str]:
    """Split into word-sized pieces that join back to exactly `text`, like a tokenizer would."""
    return _WORD.findall(text)


def estimate_tokens(messages: list[dict[str, Any]]) -> int:
    """A deterministic stand-in for a tokenizer: one token per word, plus one per message.

    The texts are split as one (a space between them splits no word and joins none): the
    scripted model counts every request's whole transcript, 4,000 messages at turn 1,000."""
    texts = [
        content if isinstance(content := m.get("content"), str) else message_text(m)
        for m in messages
    ]
    return len(" ".join(texts).split()) + len(messages)


CALL_PREFIX = "/call "
"""A user message `/call <tool> <json input>` makes the offline model call that tool, so tools,
approvals and client tools can be tried with no model at all."""


class OfflineModel:
    """Answers every request by saying it is offline and echoing the user.

    It calls a tool only when told to, in so many words: `/call delete_file {"path": "x"}`.
    Once the results are in, it reports them.
    """

    @property
    def name(self) -> str:
        return "offline"

    @property
    def supports_native_output(self) -> bool:
        """False: it cannot produce JSON, so structured output takes the final-answer tool."""
        return False

    def cost(self, usage: Usage) -> Decimal:
        """Nothing: it runs in this process."""
        return Decimal(0)

    def __repr__(self) -> str:
        return "OfflineModel()"

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        said = last_user_text(request.messages).strip()
        last = request.messages[-1] if request.messages else {}
        results = _tool_results(request.messages) if last.get("role") == "tool" else []
        if results:
            text = "Offline model: the tools answered. " + " ".join(results)
        elif said.startswith(CALL_PREFIX):
            name, _, arguments = said[len(CALL_PREFIX) :].strip().partition(" ")
            if any(t.name == name for t in request.tools):
                call_id = f"call_offline_{len(request.messages)}"
                yield ToolCallStart(tool_call_id=call_id, tool_name=name)
                yield ToolCallDelta(tool_call_id=call_id, delta=arguments.strip() or "{}")
                yield Finish(
                    finish_reason="tool-calls",
                    usage=Usage(input_tokens=estimate_tokens(request.messages), output_tokens=1),
                )
                return
            offered = ", ".join(t.name for t in request.tools) or "none"
            text = f"{OFFLINE_NOTICE} There is no tool named {name!r} (tools: {offered})."
        else:
            text = OFFLINE_NOTICE + (f" You said: {said}" if said else "")
        chunks = word_chunks(text)
        for chunk in chunks:
            yield TextDelta(delta=chunk)
        yield Finish(
            finish_reason="stop",
            usage=Usage(input_tokens=estimate_tokens(request.messages), output_tokens=len(chunks)),
        )


def _tool_results(messages: list[dict[str, Any]]) -> list[str]:
    """The results of the last round of tool calls, as `name: content` sentences."""
    names: dict[str, str] = {}
    for message in messages:
        for call in message.get("tool_calls") or []:
            names[call["id"]] = call["function"]["name"]
    results: list[str] = []
    for message in reversed(messages):
        if message.get("role") != "tool":
            break
        name = names.get(message.get("tool_call_id", ""), "tool")
        text = message_text(message).rstrip()
        # One full stop, not two: "The tool call was denied." is already a sentence.
        results.insert(0, f"{name}: {text}" + ("" if text.endswith((".", "!", "?")) else "."))
    return results
