"""Reasoning sent inside the answer's text, as `<think>…</think>`, read as reasoning.

Groq's default (`reasoning_format: "raw"`), older Ollama and many local deployments of
reasoning models (DeepSeek-R1 distills, QwQ, Qwen3 served without a reasoning parser) put the
model's thinking at the start of `content`, between `<think>` and `</think>`. Stored as text,
it would be shown as the answer and sent back to the model as what it said. A leading block
is therefore read as reasoning by default: an answer that opens with `<think>` is a reasoning
model's, in practice never a reply that means the tag. The endpoint option
`"think_tags": "off"` (`THINK_MODEL_ENDPOINTS`) keeps the text exactly as sent.

The tags may arrive split across chunks in any way (`"<thi"`, `"nk>"`), so the splitter holds
back only what could still be the start of a tag, and nothing else: text streams as it comes.
"""

from __future__ import annotations

from typing import Literal, TypeAlias

from think.models._base import ReasoningDelta, TextDelta

ThinkTags: TypeAlias = Literal["leading", "off"]
"""`leading`: a `<think>…</think>` block at the very start of the answer (after whitespace)
is reasoning; `off`: text is text."""

OPEN = "<think>"
CLOSE = "</think>"


def _partial_suffix(text: str, tag: str) -> int:
    """How many characters at the end of `text` could be the start of `tag`."""
    for size in range(min(len(text), len(tag) - 1), 0, -1):
        if tag.startswith(text[-size:]):
            return size
    return 0


class ThinkTagSplitter:
    """Splits one answer's streamed text into reasoning and text (`ThinkTags` says when)."""

    def __init__(self, mode: ThinkTags = "leading") -> None:
        # before: the answer has not yet shown whether it opens with a tag; inside: in the
        # block; after: the block closed, whitespace right after it is dropped; text: the rest.
        self._state: Literal["before", "inside", "after", "text"] = (
            "before" if mode == "leading" else "text"
        )
        self._held = ""

    def feed(self, delta: str) -> list[TextDelta | ReasoningDelta]:
        if self._state == "text":
            return [TextDelta(delta=delta)] if delta else []
        events: list[TextDelta | ReasoningDelta] = []
        pending = self._held + delta
        self._held = ""
        if self._state == "before":
            start = pending.lstrip()
            if start.startswith(OPEN):
                self._state = "inside"
                pending = start[len(OPEN) :]
            elif OPEN.startswith(start):  # whitespace, or a tag still arriving: wait
                self._held = pending
                return []
            else:
                self._state = "text"
                return [TextDelta(delta=pending)]
        if self._state == "inside":
            end = pending.find(CLOSE)
            if end < 0:
                keep = _partial_suffix(pending, CLOSE)
                thought, self._held = pending[: len(pending) - keep], pending[len(pending) - keep :]
                return [ReasoningDelta(delta=thought)] if thought else []
            if end > 0:
                events.append(ReasoningDelta(delta=pending[:end]))
            self._state = "after"
            pending = pending[end + len(CLOSE) :]
        if self._state == "after":
            pending = pending.lstrip()
            if not pending:
                return events
            self._state = "text"
        events.append(TextDelta(delta=pending))
        return events

    def flush(self) -> list[TextDelta | ReasoningDelta]:
        """What is held at the end of the answer: text that never became a tag, or the end
        of a block the model never closed (cut off by its length limit), which is reasoning."""
        held, self._held = self._held, ""
        if not held:
            return []
        if self._state == "inside":
            return [ReasoningDelta(delta=held)]
        if self._state == "before" and not held.strip():
            return []
        return [TextDelta(delta=held)]
