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
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal, TypeAlias, TypeVar

from pydantic import BaseModel, ConfigDict, Field, field_validator

from think._protocol import (
    PartLike,
    UIMessageJSON,
    UIMessagePart,
    is_static_tool_part,
    is_tool_part,
    part_kind,
    tool_name,
)

if TYPE_CHECKING:
    Parts: TypeAlias = list[UIMessagePart]
    MessageJSON: TypeAlias = UIMessageJSON
else:
    # What pydantic validates (and the OpenAPI document shows): JSON objects with a `type`,
    # checked by `_parts_have_types`, not per part type: a part is a plain dict at run time.
    Parts: TypeAlias = list[dict[str, Any]]
    # A message as JSON, as a record holds it (`TurnRecord.message`): any JSON object to
    # pydantic, as before it was typed.
    MessageJSON: TypeAlias = dict[str, Any]

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
    parts: Parts = Field(min_length=1)
    metadata: dict[str, Any] | None = None

    @field_validator("parts")
    @classmethod
    def _parts_have_types(cls, parts: list[dict[str, Any]]) -> list[dict[str, Any]]:
        for i, part in enumerate(parts):
            kind = part_kind(part)
            if not kind:
                raise ValueError(f"part {i} has no 'type'")
            if kind == "text" and not isinstance(part.get("text"), str):
                raise ValueError(f"part {i} is a text part without a string 'text'")
        return storable(parts)

    @field_validator("id", "metadata")
    @classmethod
    def _storable(cls, value: Any) -> Any:
        # A message made in Python (a turn's input, `add_messages`, a hook's) may carry text
        # from a model or a page: NUL and lone surrogates are replaced here, where it enters
        # (`think._messages`), so what is stored is what the model is shown. HTTP bodies never get
        # this far with them: they are refused, naming the field (`api/schemas.py`).
        return storable(value)

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


def text_of(parts: Sequence[PartLike]) -> str:
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


def search_text(parts: Sequence[PartLike]) -> str:
    """What `messages.text_content` stores for full-text search: `text_of`, cut at
    `SEARCH_TEXT_LIMIT` and HTML-escaped.

    Escaped because Postgres's text-search parser takes anything like `<b and c>` for an XML
    tag and indexes none of the words in it (`if a<b and c>d` would lose `b` and `c`), while
    `&lt;` is an entity it skips cleanly; and because search snippets (`ts_headline`) are then
    safe HTML with nothing but the `<mark>` tags added.
    """
    return html.escape(text_of(parts)[:SEARCH_TEXT_LIMIT], quote=False)


# -- text Postgres can store ------------------------------------------------------------------
#
# What every door that lets outside content in passes it through.
#
# Postgres refuses two things a Python `str` may hold: a NUL character (a `text` value cannot
# hold one, and `jsonb` refuses the escape `\u0000`: `UntranslatableCharacter`), and a lone
# UTF-16 surrogate (`"\ud800"` is valid JSON text and decodes to a `str`, but UTF-8 cannot
# encode it: psycopg fails before the statement is sent, orjson refuses to dump it). Any user
# can ask a model to write them, any fetched page or MCP server can hand them back, and a write
# that Postgres refuses is retried like an outage: the conversation wedged.
#
# They are *replaced*, each by U+FFFD (the replacement character, what a UTF-8 decoder puts in
# place of what it cannot read), not escaped: a replaced string is still the text the model
# wrote, one character per hostile character, and means nothing new. An escape (`\0`, `\x00`)
# would be indistinguishable from a model or page that wrote those characters itself, and
# would need un-escaping everywhere the text is read. A high surrogate followed by a low one,
# held as two code points (a `str` decoded with `surrogatepass`), is joined into the character
# the pair spells; a well-formed `str` (emoji included) comes back unchanged, as the very
# same object.
#
# `storable` is applied where content enters (a model's deltas, a tool's output, a fetched
# page, an MCP result, a user's message from Python), so that what the model is shown in later
# steps and what is stored are the same text; the storage layer applies it once more when it
# serializes `jsonb`, as a backstop for a door nobody thought of.

REPLACEMENT = "\ufffd"
"""What each NUL and each lone surrogate becomes."""

_T = TypeVar("_T")


def storable_text(text: str) -> str:
    """`text` with each NUL and each lone surrogate replaced by U+FFFD, surrogate pairs
    joined; `text` itself when it holds neither.

    Cheap on the common case, since every model delta passes here: an ASCII string is
    checked for NUL in C (0.1 us for a 120-character delta, against 0.8 for a regular
    expression), any other by encoding it to UTF-8, which fails exactly on a surrogate
    (160 us for 100,000 characters with an emoji, against 270)."""
    if text.isascii():
        return text.replace("\x00", REPLACEMENT) if "\x00" in text else text
    if "\x00" in text:
        text = text.replace("\x00", REPLACEMENT)
    else:
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            pass
        else:
            return text
    # UTF-16 is the one encoding that carries a pair of surrogate code points as the pair it
    # is: encoded so (surrogatepass), a pair decodes back as the character it spells, and a
    # lone one, which no UTF-16 decoder accepts, as U+FFFD.
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def storable(value: _T) -> _T:
    """`value` (a string, or JSON-like data: dicts, lists, tuples, scalars) with every string
    in it, object keys included, made storable by `storable_text`. Returns `value` itself when
    nothing in it needed a change, so the common case copies nothing. A container that holds
    itself, or one nested deeper than `_STORABLE_DEPTH`, is left as it is: no JSON encoder
    writes it either (a tool's output becomes its `str()`, `tool_output_json`), and the
    storage layer's own encoder replaces what is left (`think.storage._db.storable_json`)."""
    return _storable(value, set(), 0)  # type: ignore[no-any-return]


_STORABLE_DEPTH = 200
"""Far deeper than any message or tool output; well inside Python's recursion limit."""


def _storable(value: Any, path: set[int], depth: int) -> Any:
    if isinstance(value, str):
        return storable_text(value)
    if not isinstance(value, dict | list | tuple):
        return value
    if depth >= _STORABLE_DEPTH or id(value) in path:
        return value
    path.add(id(value))
    try:
        if isinstance(value, dict):
            changed: dict[Any, Any] | None = None
            for i, (key, item) in enumerate(value.items()):
                new_key = _storable(key, path, depth + 1)
                new_item = _storable(item, path, depth + 1)
                if changed is None and (new_key is not key or new_item is not item):
                    changed = dict(list(value.items())[:i])
                if changed is not None:
                    changed[new_key] = new_item
            return value if changed is None else changed
        items = [_storable(item, path, depth + 1) for item in value]
        if all(new is old for new, old in zip(items, value, strict=True)):
            return value
        return items if isinstance(value, list) else tuple(items)
    finally:
        path.discard(id(value))
