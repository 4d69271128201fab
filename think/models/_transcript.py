"""UIMessages to the Chat Completions message list every OpenAI-compatible server accepts.

An assistant UIMessage holds a whole turn: several steps separated by `step-start` parts, each
with text and tool calls. The model needs each step as its own assistant message followed by a
`tool` message per call, in call order.
"""

from __future__ import annotations

import json
import weakref
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any, Generic, TypeVar, cast

from think._messages import UIMessage
from think._protocol import (
    PartLike,
    image_parts,
    is_settled,
    is_tool_part,
    joined_text,
    split_steps,
    text_parts,
    tool_name,
)

INTERRUPTED_TOOL_RESULT = "The tool call was interrupted before it produced a result."


Repair = Callable[[dict[str, Any]], dict[str, Any]]


def interrupted_tool_error(part: dict[str, Any]) -> dict[str, Any]:
    """The default repair: a tool call with no settled result becomes an errored result."""
    return {**part, "state": "output-error", "errorText": INTERRUPTED_TOOL_RESULT}


def to_chat_messages(
    system: str, messages: list[UIMessage], repair: Repair = interrupted_tool_error
) -> list[dict[str, Any]]:
    """`repair` settles tool calls left without a result (a cancelled or crashed turn), since
    providers reject a transcript with a tool call and no answer to it."""
    out: list[dict[str, Any]] = []
    if system:
        out.append({"role": "system", "content": system})
    for message in messages:
        out.extend(dict(m) for m in converted(message, repair)[0])
    return out


_V = TypeVar("_V")


class ByIdentity(Generic[_V]):
    """What was derived from a message, kept by the message's identity while the message
    lives. A worker's cached paths (`think.storage.PathCache`) and chat histories
    (`think.sessions._chat_history`) hand the same message objects to every step of a
    conversation, so a long transcript is converted once, not once per step.

    An entry holds its message weakly and goes when the message does: those caches bound what
    is kept (by bytes too), and this one follows them. It once held its messages itself, for
    as long as 20,000 later ones did not push them out: one message with a 14 MiB tool call
    then kept it and its conversion in a worker long after every other cache let go
    (docs/benchmarks.md, "A large workspace write"). The oldest go first past `size`."""

    def __init__(self, size: int = 20_000) -> None:
        self._entries: OrderedDict[int, tuple[weakref.ref[UIMessage], _V]] = OrderedDict()
        self._size = size

    def get(self, message: UIMessage) -> _V | None:
        found = self._entries.get(id(message))
        return found[1] if found is not None and found[0]() is message else None

    def put(self, message: UIMessage, value: _V) -> None:
        key = id(message)
        entries = self._entries

        def gone(_: weakref.ref[UIMessage]) -> None:
            # While `message` lived no other object had its id, so the entry is still its own.
            entries.pop(key, None)

        entries[key] = (weakref.ref(message, gone), value)
        if len(entries) > self._size:
            entries.popitem(last=False)


_conversions: ByIdentity[list[dict[str, Any]]] = ByIdentity()
"""Messages whose conversion called `repair` (an unanswered tool call) are not kept: the
repair is the agent's to decide, each time."""


def converted(message: UIMessage, repair: Repair) -> tuple[list[dict[str, Any]], bool]:
    """`message` as Chat Completions messages, and whether that called `repair` (such a
    conversion is not kept: the repair is the agent's to decide, each time). The lists are
    shared by every step that reads the message: never change them."""
    found = _conversions.get(message)
    if found is not None:
        return found, False
    repaired = False

    def watching(part: dict[str, Any]) -> dict[str, Any]:
        nonlocal repaired
        repaired = True
        return repair(part)

    if message.role == "assistant":
        result = _assistant(message.parts, watching)
    else:
        content = _user_content(message.parts)
        result = [{"role": message.role, "content": content}] if content else []
    if not repaired:
        _conversions.put(message, result)
    return result, repaired


def _user_content(parts: Sequence[PartLike]) -> str | list[dict[str, Any]]:
    texts = [p["text"] for p in text_parts(parts)]
    images = image_parts(parts)
    if not images:
        return "\n".join(texts)
    content: list[dict[str, Any]] = [{"type": "text", "text": t} for t in texts]
    content += [{"type": "image_url", "image_url": {"url": p["url"]}} for p in images]
    return content


def _assistant(parts: Sequence[PartLike], repair: Repair) -> list[dict[str, Any]]:
    """Each step as an assistant message and its calls' results; a user's steering message
    (a `steering-message` part: words sent to the running turn) as a user message where it
    joined the answer, as the AI SDK's `convertToModelMessages` reads it."""
    out: list[dict[str, Any]] = []
    for step in split_steps(parts):
        said: list[PartLike] = []
        for part in step:
            if part.get("type") != "steering-message":
                said.append(part)
                continue
            out += _assistant_step(said, repair)
            said = []
            content = _user_content(part.get("parts") or [])
            if content:
                out.append({"role": "user", "content": content})
        out += _assistant_step(said, repair)
    return out


def _assistant_step(parts: Sequence[PartLike], repair: Repair) -> list[dict[str, Any]]:
    if not parts:
        return []
    out: list[dict[str, Any]] = []
    step = _repaired(_without_program_calls(parts), repair)
    text = joined_text(step)
    calls = [p for p in step if is_tool_part(p)]
    if not text and not calls:
        return []
    message: dict[str, Any] = {"role": "assistant", "content": text or None}
    thinking = thinking_blocks(step)
    if thinking:
        message["thinking_blocks"] = thinking
    items = reasoning_items(step)
    if items:
        message["reasoning_items"] = items
    if calls:
        message["tool_calls"] = [
            {
                "id": p["toolCallId"],
                "type": "function",
                "function": {
                    "name": tool_name(p),
                    "arguments": json.dumps(p.get("input") or {}),
                },
            }
            for p in calls
        ]
    out.append(message)
    media: list[dict[str, Any]] = []
    for p in calls:
        out.append({"role": "tool", "tool_call_id": p["toolCallId"], "content": _result(p)})
        if p.get("state") == "output-available" and is_media(p.get("output")):
            media.append(p["output"])
    if media:
        # A tool message carries text only: the files a tool read (the workspace's `read`)
        # follow as a user message, which multimodal models accept.
        out.append({"role": "user", "content": [_media_part(m) for m in media]})
    return out


def _without_program_calls(step: Sequence[PartLike]) -> Sequence[PartLike]:
    """The step without the calls a code-mode program made (`think.codemode`): each is a tool
    part `<execute call id>:<n>` for the stream and the record, while the model made only the
    `execute` call, whose output holds what the program did with them."""
    ids = {str(p.get("toolCallId")) for p in step if is_tool_part(p)}
    inner = set()
    for call_id in ids:
        head, sep, tail = call_id.rpartition(":")
        if sep and tail.isdigit() and head in ids:
            inner.add(call_id)
    if not inner:
        return step
    return [p for p in step if not (is_tool_part(p) and p.get("toolCallId") in inner)]


def _repaired(step: Sequence[PartLike], repair: Repair) -> list[PartLike]:
    """`step` with each tool call that has no settled result repaired, in place: into a settled
    call, or into another part (the spec's `ask_user` example turns the call into the text of
    its question), which then reads as what it is, its call gone from the transcript. A repair
    that leaves the call unsettled gets the default repair over it: a provider refuses a call
    with no answer."""
    if all(is_settled(p) for p in step if is_tool_part(p)):
        return list(step)
    out: list[PartLike] = []
    for part in step:
        if is_tool_part(part) and not is_settled(part):
            # A repair takes and gives the plain dict a part is at run time.
            fixed = repair(cast(dict[str, Any], part))
            if is_tool_part(fixed) and not is_settled(fixed):
                fixed = interrupted_tool_error(fixed)
            part = fixed
        out.append(part)
    return out


def thinking_blocks(step: Sequence[PartLike]) -> list[dict[str, Any]]:
    """The step's signed reasoning, as the thinking blocks Anthropic must be handed back
    (before a `tool_use`, when thinking is on): reasoning parts whose `providerMetadata` holds
    Anthropic's `signature` (or a redacted block's `redactedData`), the AI SDK's names. Carried
    on the Chat-shape assistant message as `thinking_blocks` (LiteLLM's field for the same);
    a step without signed reasoning gets no such field, so no other server's transcript
    changes."""
    blocks: list[dict[str, Any]] = []
    for part in step:
        if part.get("type") != "reasoning":
            continue
        meta = part.get("providerMetadata")
        signed = meta.get("anthropic") if isinstance(meta, dict) else None
        if not isinstance(signed, dict):
            continue
        signature, redacted = signed.get("signature"), signed.get("redactedData")
        if isinstance(signature, str) and signature:
            text = part.get("text")
            thought = text if isinstance(text, str) else ""
            blocks.append({"type": "thinking", "thinking": thought, "signature": signature})
        elif isinstance(redacted, str) and redacted:
            blocks.append({"type": "redacted_thinking", "data": redacted})
    return blocks


def reasoning_items(step: Sequence[PartLike]) -> list[dict[str, Any]]:
    """The step's OpenAI reasoning, as the Responses API's reasoning items to hand back:
    reasoning parts whose `providerMetadata.openai` holds the item's `itemId` (and, when the
    provider keeps nothing, its `reasoningEncryptedContent`), the AI SDK's names; the part's
    text is the item's summary. Carried on the Chat-shape assistant message as
    `reasoning_items`, only where there are some, as `thinking_blocks` are."""
    items: list[dict[str, Any]] = []
    for part in step:
        if part.get("type") != "reasoning":
            continue
        meta = part.get("providerMetadata")
        found = meta.get("openai") if isinstance(meta, dict) else None
        item_id = found.get("itemId") if isinstance(found, dict) else None
        if not isinstance(found, dict) or not isinstance(item_id, str) or not item_id:
            continue
        text = part.get("text")
        summary = [{"type": "summary_text", "text": text}] if isinstance(text, str) and text else []
        item: dict[str, Any] = {"type": "reasoning", "id": item_id, "summary": summary}
        encrypted = found.get("reasoningEncryptedContent")
        if isinstance(encrypted, str) and encrypted:
            item["encrypted_content"] = encrypted
        items.append(item)
    return items


def is_media(output: Any) -> bool:
    """A tool's media result (`think.tools`' `read` of an image or a PDF)."""
    return (
        isinstance(output, dict)
        and output.get("type") == "media"
        and isinstance(output.get("url"), str)
        and isinstance(output.get("mediaType"), str)
    )


def _media_part(media: dict[str, Any]) -> dict[str, Any]:
    if str(media["mediaType"]).startswith("image/"):
        return {"type": "image_url", "image_url": {"url": media["url"]}}
    name = str(media.get("path", "file")).rsplit("/", 1)[-1]
    return {"type": "file", "file": {"filename": name, "file_data": media["url"]}}


def _result(part: PartLike) -> str:
    state = part.get("state")
    if state == "output-available":
        output = part.get("output")
        if isinstance(output, dict) and is_media(output):
            return (
                f"{output.get('path', 'The file')} ({output['mediaType']}, "
                f"{output.get('bytes', '?')} bytes) is attached below."
            )
        return output if isinstance(output, str) else json.dumps(output)
    if state == "output-error":
        return f"Error: {part.get('errorText', 'the tool failed')}"
    if state == "output-denied":
        reason = (part.get("approval") or {}).get("reason")
        return f"The tool call was denied: {reason}" if reason else "The tool call was denied."
    return INTERRUPTED_TOOL_RESULT
