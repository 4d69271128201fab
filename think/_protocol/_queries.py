"""What the framework asks of a UI message stream chunk or a message part, answered in one
place beside the types (`think._protocol`): which chunks carry content or end a stream, a
message's steps and their text, the part of a tool call or of an approval. Nowhere else is a
chunk's or a part's `type` read or a part sliced by hand.
"""

# No `from __future__ import annotations`, as in `think._protocol`.
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypeAlias, TypeVar, cast

from typing_extensions import TypeIs

from think._protocol._types import (
    DATA_PREFIX,
    DataChunk,
    DataUIPart,
    ErrorChunk,
    FileUIPart,
    TextUIPart,
    ToolCallPart,
    UIMessageChunk,
    UIMessagePart,
    is_tool_part,
)

# ---- chunks by kind: what the writer, the step stream and the replay loop ask of a chunk ----

CONTENT_CHUNKS = frozenset(
    {
        "text-delta",
        "reasoning-delta",
        "tool-input-start",
        "tool-input-delta",
        "tool-input-available",
    }
)
"""The chunks that carry what the model says: the first of them is the latency a user feels."""

TERMINAL_CHUNK_TYPES = frozenset({"finish", "error", "abort"})
"""The chunks that end a turn's stream (`think.storage.TERMINAL_CHUNKS` is the same set)."""


def data_type(name: str) -> str:
    """The chunk and part type of the data `name` (`skipped` → `data-skipped`)."""
    return DATA_PREFIX + name


def is_data_chunk(chunk: UIMessageChunk) -> TypeIs[DataChunk]:
    """A `data-<name>` chunk; every other chunk's `type` is one of the literals above, so a
    chunk that is not one narrows (in a `match` on its `type`) to exactly its own type."""
    return chunk["type"].startswith(DATA_PREFIX)


def is_error_chunk(chunk: UIMessageChunk) -> TypeIs[ErrorChunk]:
    """An `error` chunk: the turn failed, and `errorText` says what a client may be told."""
    return chunk["type"] == "error"


def is_content_chunk(chunk: UIMessageChunk) -> bool:
    """A chunk of what the model says (`CONTENT_CHUNKS`)."""
    return chunk["type"] in CONTENT_CHUNKS


def is_reasoning_chunk(chunk: UIMessageChunk) -> bool:
    """A chunk of the model's reasoning, which an agent may keep from clients."""
    return chunk["type"] in ("reasoning-start", "reasoning-delta", "reasoning-end")


def is_terminal_chunk(chunk: UIMessageChunk) -> bool:
    """The last chunk of a turn's stream: `finish`, `error` or `abort`."""
    return chunk["type"] in TERMINAL_CHUNK_TYPES


def chunk_kind(chunk: UIMessageChunk) -> str:
    """A chunk's type, for logs and metrics."""
    return chunk["type"]


# ---- part queries: what the framework asks of a message's parts, answered in one place ----
# Like the tool-part predicates above they take any mapping (a typed part, or the plain dict a
# stored message holds), and read only keys the protocol defines; the predicates return `bool`
# for the reason given there. The queries that hand parts back give them their type.

PartLike: TypeAlias = Mapping[str, Any]
"""A part as a query takes it: a typed `UIMessagePart` or the plain dict read from JSONB."""


def is_step_start(part: PartLike) -> bool:
    """The `step-start` part that opens each step of an assistant message."""
    return part.get("type") == "step-start"


def is_text_part(part: PartLike) -> bool:
    """A text part (one with a string `text`, as `UIMessage` admits it)."""
    return part.get("type") == "text"


def is_reasoning_part(part: PartLike) -> bool:
    return part.get("type") == "reasoning"


def is_file_part(part: PartLike) -> bool:
    return part.get("type") == "file"


def is_image_part(part: PartLike) -> bool:
    """A file part whose media type is an image: what a model is shown as one."""
    return is_file_part(part) and str(part.get("mediaType", "")).startswith("image/")


def part_kind(part: PartLike) -> str:
    """A part's type, `""` for a part without one (for logs, counts and size reports)."""
    kind = part.get("type")
    return kind if isinstance(kind, str) else ""


def text_parts(parts: Iterable[PartLike]) -> list[TextUIPart]:
    return [cast(TextUIPart, p) for p in parts if is_text_part(p)]


def image_parts(parts: Iterable[PartLike]) -> list[FileUIPart]:
    return [cast(FileUIPart, p) for p in parts if is_image_part(p)]


def joined_text(parts: Iterable[PartLike]) -> str:
    """The text of `parts`' text parts, run together (one step's words, as the model wrote
    them across its text parts)."""
    return "".join(str(p.get("text", "")) for p in parts if is_text_part(p))


def joined_reasoning(parts: Iterable[PartLike]) -> str:
    """The text of `parts`' reasoning parts, run together."""
    return "".join(str(p.get("text", "")) for p in parts if is_reasoning_part(p))


_Part = TypeVar("_Part", bound=PartLike)


def split_steps(parts: Sequence[_Part]) -> list[list[_Part]]:
    """An assistant message's parts cut at each `step-start`, which is dropped: first what
    came before the first one (often nothing), then one list per step."""
    steps: list[list[_Part]] = [[]]
    for part in parts:
        if is_step_start(part):
            steps.append([])
        else:
            steps[-1].append(part)
    return steps


def last_step(parts: Sequence[_Part]) -> Sequence[_Part]:
    """The parts after the last `step-start` (all of them when there is none)."""
    for i in range(len(parts) - 1, -1, -1):
        if is_step_start(parts[i]):
            return parts[i + 1 :]
    return parts


def last_step_text(parts: Sequence[PartLike]) -> str:
    """The text of the message's last step: a turn's answer, or the partial answer of the
    step being streamed (earlier steps' text came before tool calls)."""
    return joined_text(last_step(parts))


def tool_part(parts: Iterable[PartLike], tool_call_id: str) -> ToolCallPart | None:
    """The part of the tool call `tool_call_id`, if the message holds it."""
    for part in parts:
        if part.get("toolCallId") == tool_call_id and is_tool_part(part):
            return cast(ToolCallPart, part)
    return None


def tool_calls(parts: Iterable[PartLike]) -> list[ToolCallPart]:
    """The tool calls' parts, in order."""
    return [cast(ToolCallPart, p) for p in parts if is_tool_part(p)]


def approval_part(parts: Iterable[PartLike], approval_id: str) -> ToolCallPart | None:
    """The tool call whose approval `approval_id` was requested, if the message holds it."""
    for part in parts:
        approval = part.get("approval")
        if isinstance(approval, Mapping) and approval.get("id") == approval_id:
            return cast(ToolCallPart, part)
    return None


def is_decided(part: ToolCallPart) -> bool:
    """Whether the call's approval was answered (approved or denied)."""
    return "approved" in part.get("approval", {})


def is_settled(part: PartLike) -> bool:
    """Whether a tool call's part has its outcome: an output, an error, or a denial."""
    state = part.get("state")
    return isinstance(state, str) and state.startswith("output-")


def awaits_approval(part: PartLike) -> bool:
    """A tool call paused for a person to approve or deny it."""
    return is_tool_part(part) and part.get("state") == "approval-requested"


def awaits_result(part: PartLike) -> bool:
    """A tool call whose input is complete and whose result has not come (a client tool's
    call waits so for its client)."""
    return is_tool_part(part) and part.get("state") == "input-available"


def is_data_part(part: PartLike) -> bool:
    """A `data-<name>` part."""
    kind = part.get("type")
    return isinstance(kind, str) and kind.startswith(DATA_PREFIX)


def data_part(parts: Iterable[PartLike], kind: str, id: str) -> DataUIPart | None:
    """The data part of type `kind` and id `id`, which a data chunk of the same two replaces."""
    for part in parts:
        if is_data_part(part) and part["type"] == kind and part.get("id") == id:
            return cast(DataUIPart, part)
    return None


def has_output(part: ToolCallPart | None) -> bool:
    """Whether the call (if there is one) ended with an output, not an error or a denial."""
    return part is not None and part["state"] == "output-available"


def parts_of(message: Mapping[str, Any] | None) -> list[UIMessagePart]:
    """The parts of a message as stored (`TurnRecord.message`, a `UIMessage.wire()`), none for
    a turn without a message yet."""
    if message is None:
        return []
    parts: list[UIMessagePart] = message.get("parts", [])
    return parts
