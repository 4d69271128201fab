"""Messages in the AI SDK UIMessage shape, the one format used at every boundary.

A message is `{"id", "role", "parts", "metadata"?}`; parts are kept as JSON objects with a
`type` discriminator exactly as the AI SDK defines them, so a browser using `useChat` and our
storage read the same thing with no translation layer in between.
"""

from __future__ import annotations

import html
import json
import re
import secrets
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from think._protocol import is_static_tool_part, is_tool_part, tool_name

Role = Literal["user", "assistant", "system"]


ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}")
"""What a caller-chosen id (conversation, submission) may be: safe in URLs, SQL and logs."""


def new_id(prefix: str) -> str:
    """A short random id; readable prefixes make logs and the Temporal UI easier to scan."""
    return f"{prefix}_{secrets.token_hex(8)}"


class UIMessage(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str = Field(default_factory=lambda: new_id("msg"), min_length=1, max_length=200)
    role: Role
    parts: list[dict[str, Any]] = Field(min_length=1)
    metadata: dict[str, Any] | None = None

    @field_validator("parts")
    @classmethod
    def _parts_have_types(cls, parts: list[dict[str, Any]]) -> list[dict[str, Any]]:
        for i, part in enumerate(parts):
            kind = part.get("type")
            if not isinstance(kind, str) or not kind:
                raise ValueError(f"part {i} has no 'type'")
            if kind == "text" and not isinstance(part.get("text"), str):
                raise ValueError(f"part {i} is a text part without a string 'text'")
        return parts

    @classmethod
    def user_text(cls, text: str, *, id: str | None = None) -> UIMessage:
        parts = [{"type": "text", "text": text}]
        if id is None:  # minted by the default: `chose_id` tells it from an id a caller chose
            return cls(role="user", parts=parts)
        return cls(id=id, role="user", parts=parts)

    @property
    def chose_id(self) -> bool:
        """Whether the id was given rather than minted here: only a given id can already be
        taken (a minted one is 64 random bits), so only a given id is looked up at admission."""
        return "id" in self.model_fields_set

    def wire(self) -> dict[str, Any]:
        return self.model_dump(exclude_none=True)


SEARCH_TEXT_LIMIT = 100_000
"""Characters of a message's text that search indexes. Postgres refuses a `tsvector` over 1 MB
(which would fail the message's INSERT, and with it the turn), and a giant tool output is not
worth indexing past its start."""


def text_of(parts: list[dict[str, Any]]) -> str:
    """The text of a message as a person reads it in a transcript: its text parts, and for
    each tool call the tool's name, input and output (or error). Reasoning is left out: it is
    the model's working, often long, and would outrank what was actually said."""
    out: list[str] = []
    for part in parts:
        kind = str(part.get("type", ""))
        if kind == "text":
            out.append(str(part.get("text", "")))
        elif is_tool_part(part):
            # A dynamic part without its `toolName` (never one of ours) still indexes its content.
            static = is_static_tool_part(part)
            out.append(tool_name(part) if static else str(part.get("toolName") or ""))
            for key in ("input", "output", "errorText"):
                value = part.get(key)
                if isinstance(value, str):
                    out.append(value)
                elif value is not None:
                    # Not ASCII-escaped: "café" must stay a word, not "caf\u00e9".
                    out.append(json.dumps(value, ensure_ascii=False))
    return "\n".join(s for s in out if s)


def search_text(parts: list[dict[str, Any]]) -> str:
    """What `messages.text_content` stores for full-text search: `text_of`, cut at
    `SEARCH_TEXT_LIMIT` and HTML-escaped.

    Escaped because Postgres's text-search parser takes anything like `<b and c>` for an XML
    tag and indexes none of the words in it (`if a<b and c>d` would lose `b` and `c`), while
    `&lt;` is an entity it skips cleanly; and because search snippets (`ts_headline`) are then
    safe HTML with nothing but the `<mark>` tags added.
    """
    return html.escape(text_of(parts)[:SEARCH_TEXT_LIMIT], quote=False)
