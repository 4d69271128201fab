"""Messages in the AI SDK UIMessage shape, the one format used at every boundary.

A message is `{"id", "role", "parts", "metadata"?}`; parts are kept as JSON objects with a
`type` discriminator exactly as the AI SDK defines them, so a browser using `useChat` and our
storage read the same thing with no translation layer in between.
"""

from __future__ import annotations

import secrets
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

Role = Literal["user", "assistant", "system"]


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
        return cls(id=id or new_id("msg"), role="user", parts=[{"type": "text", "text": text}])

    def wire(self) -> dict[str, Any]:
        return self.model_dump(exclude_none=True)


def text_of(parts: list[dict[str, Any]]) -> str:
    """The searchable text of a message: its text parts, reasoning and tool inputs/outputs."""
    import json

    out: list[str] = []
    for part in parts:
        kind = part.get("type", "")
        if kind in ("text", "reasoning"):
            out.append(str(part.get("text", "")))
        elif kind.startswith("tool-") or kind == "dynamic-tool":
            for key in ("input", "output", "errorText"):
                if part.get(key) is not None:
                    value = part[key]
                    out.append(value if isinstance(value, str) else json.dumps(value))
    return "\n".join(s for s in out if s)
