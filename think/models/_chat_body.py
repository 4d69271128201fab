"""A Chat Completions request's body, as bytes: what the chat adapter posts.

Apart from the adapter because it is where a long transcript's cost lives: the history a
worker keeps encoded (`EncodedMessages`) goes out as the bytes it already is, and the fields
only other adapters read are kept from a Chat Completions server without encoding it again.
"""

from __future__ import annotations

from typing import Any

import orjson

from think.models._base import EncodedMessages

OTHER_ADAPTERS_FIELDS = ("thinking_blocks", "reasoning_items")
"""Fields of the Chat-shape transcript that only other adapters read (Anthropic's signed
thinking, the Responses API's reasoning items): not Chat Completions', and refused by a server
that validates messages strictly (OpenAI's), so never sent to one. A conversation reaches a Chat
Completions server with them when it changes model, or falls back to another provider."""
_OTHER_ADAPTERS_MARKERS = tuple(f'"{f}"'.encode() for f in OTHER_ADAPTERS_FIELDS)


def chat_only(
    messages: list[dict[str, Any]], encoded: EncodedMessages | None
) -> tuple[list[dict[str, Any]], EncodedMessages | None]:
    """`messages` (and `encoded`, their run already encoded) without `OTHER_ADAPTERS_FIELDS`.
    Checked where it is cheap: the encoded run by a search of its bytes (a hit, even one in
    some message's text, drops the run, and every message is encoded afresh), the rest
    message by message; copies only the messages that have such a field."""
    if encoded is not None and any(m in encoded.json for m in _OTHER_ADAPTERS_MARKERS):
        encoded = None
    unencoded = (
        range(len(messages))
        if encoded is None
        else [*range(encoded.start), *range(encoded.end, len(messages))]
    )
    stripped: list[dict[str, Any]] | None = None
    for i in unencoded:
        if any(f in messages[i] for f in OTHER_ADAPTERS_FIELDS):
            stripped = stripped if stripped is not None else list(messages)
            stripped[i] = {k: v for k, v in messages[i].items() if k not in OTHER_ADAPTERS_FIELDS}
    return (messages if stripped is None else stripped), encoded


def request_json(body: dict[str, Any], encoded: EncodedMessages | None) -> bytes:
    """`body` as JSON, with `encoded`'s run of `body["messages"]` as the bytes it already is.

    The messages come last (the order of an object's keys means nothing), encoded or not: a
    transcript that grew by a step is then the last request's bytes and a tail, which a model
    server (the scripted one, `think.testing`) can take from where it grew."""
    messages: list[dict[str, Any]] = body["messages"]
    fields = {k: v for k, v in body.items() if k != "messages"}
    if encoded is None:
        return orjson.dumps({**fields, "messages": messages})
    pieces = [orjson.dumps(m) for m in messages[: encoded.start]]
    if encoded.json:
        pieces.append(encoded.json)
    pieces += [orjson.dumps(m) for m in messages[encoded.end :]]
    rest = orjson.dumps(fields)
    joined = [rest[:-1], b',"messages":[']
    for i, piece in enumerate(pieces):
        joined += (b",", piece) if i else (piece,)
    return b"".join([*joined, b"]}"])  # one copy of the long run
