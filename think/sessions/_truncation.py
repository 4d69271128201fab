"""Read-time truncation: older messages are cut for the model, never in storage.

Tool outputs over `TOOL_OUTPUT_LIMIT` characters and texts over `TEXT_LIMIT` characters are
cut in the older messages of the transcript a model step reads. The newest `KEEP_WHOLE`
messages are always whole, and the cut-off moves in steps of `Think.truncation_step`
messages, so the prompt's prefix (what a provider caches) changes only once every that many
messages instead of on every turn: with the default 8, the messages cut are the oldest
`8 * k` that leave at least 4 whole, so 4 to 11 of the newest stay whole.

`truncation_step = 1` cuts all but the 4 newest on every turn; `None` (or `math.inf`) never
cuts. The stored messages, `GET …/messages` and search are never affected.
"""

from __future__ import annotations

import json
import math

from think._messages import UIMessage
from think._protocol import PartLike, is_text_part, is_tool_part
from think.exceptions import UserError
from think.models import ByIdentity

TOOL_OUTPUT_LIMIT = 500
"""Characters of an older message's tool output (or tool error) the model reads."""
TEXT_LIMIT = 10_000
"""Characters of an older message's text part the model reads."""
KEEP_WHOLE = 4
"""The newest messages the model always reads whole."""


def check_step(step: object) -> None:
    """Raise `UserError` unless `step` is a valid `truncation_step`."""
    if step is None or step == math.inf:
        return
    if isinstance(step, bool) or not isinstance(step, int) or step < 1:
        raise UserError(
            f"truncation_step={step!r} must be a whole number of messages, 1 or more, or None "
            "(or math.inf) to turn read-time truncation off"
        )


def cutoff(count: int, step: int | float | None) -> int:
    """How many of the oldest of `count` messages are cut: a multiple of `step` that leaves at
    least `KEEP_WHOLE` messages whole (0 when truncation is off)."""
    if step is None or step == math.inf or count <= KEEP_WHOLE:
        return 0
    whole_steps = int(step)
    return (count - KEEP_WHOLE) // whole_steps * whole_steps


def truncate(messages: list[UIMessage], step: int | float | None) -> list[UIMessage]:
    """The transcript as the model reads it: the messages before `cutoff` with their long tool
    outputs and texts cut, the rest as they are. Cut messages are copies; `messages` is not
    changed. A worker's steps cut only what changed (`think.sessions._chat_history`), and must
    agree with this."""
    cut = cutoff(len(messages), step)
    if cut == 0:
        return messages
    return [cut_message(m) for m in messages[:cut]] + messages[cut:]


_cuts: ByIdentity[UIMessage] = ByIdentity()
"""Each message's cut form, kept: the same copy for every step, which `to_chat_messages`
then converts once."""


def cut_message(message: UIMessage) -> UIMessage:
    found = _cuts.get(message)
    if found is None:
        found = _cut(message)
        _cuts.put(message, found)
    return found


def _cut(message: UIMessage) -> UIMessage:
    parts = message.parts
    for i, part in enumerate(parts):
        cut = _cut_part(part)
        if cut is not part:  # copy the message only when something is cut (rarely)
            rest = [_cut_part(p) for p in parts[i + 1 :]]
            return message.model_copy(update={"parts": [*parts[:i], cut, *rest]})
    return message


def _cut_part(part: PartLike) -> PartLike:
    if is_text_part(part):
        text = part.get("text")
        if isinstance(text, str) and len(text) > TEXT_LIMIT:
            return {**part, "text": _shorten(text, TEXT_LIMIT)}
        return part
    state = part.get("state")
    if state != "output-available" and state != "output-error":
        return part  # not a settled tool call: reasoning, step starts, files, ...
    if not is_tool_part(part):
        return part
    if state == "output-available":
        output = part.get("output")
        shown = output if isinstance(output, str) else json.dumps(output, ensure_ascii=False)
        if len(shown) > TOOL_OUTPUT_LIMIT:
            return {**part, "output": _shorten(shown, TOOL_OUTPUT_LIMIT)}
        return part
    error = str(part.get("errorText", ""))
    if len(error) > TOOL_OUTPUT_LIMIT:
        return {**part, "errorText": _shorten(error, TOOL_OUTPUT_LIMIT)}
    return part


def _shorten(text: str, limit: int) -> str:
    return f"{text[:limit]}… [{len(text) - limit:,} more characters cut from this older message]"
