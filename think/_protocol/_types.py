"""The AI SDK's UI message stream, typed: its chunks and the message parts they fold into.

A turn speaks the AI SDK's wire protocol end to end: the model step emits chunks, the stream
log stores them as JSONB, the gateway sends them as SSE `data:` lines, `MessageBuilder` folds
them into the stored message's parts, and a browser's `useChat` folds the same chunks into the
same parts. These types are that vocabulary, field for field as the SDK's own schemas
(`uiMessageChunkSchema` in `ui-message-stream/ui-message-chunks.ts` and the part schemas of
`ui/validate-ui-messages.ts`, `ai` 7); `tests/streaming/test_protocol.py` reads those schemas out of
the installed `ai` package and fails when a field, its optionality or a literal drifts.

They are `TypedDict`s, not pydantic models: a chunk is a plain dict on the wire, in Postgres
and in every hot loop (a token is a chunk), so the types cost nothing at run time, and what
reaches us from storage or a client is checked where it enters (`UIMessage`), not per chunk.

Why at the root, beside `think._messages`: every layer reads chunks or parts — the builder,
the activities, sessions, models' transcript, the gateway, and `_messages`' search text — and
this module imports nothing from `think`, so it sits below them all. `think.storage` keeps
chunks and parts opaque (JSONB in, JSONB out), naming these types only in annotations.
`think.streaming` re-exports them as part of its face.

Every producer and consumer takes these types (`StepStream.emit`, `ChunkWriter.emit`, the
stream log's reads, `follow`, `Think.on_chunk`; `UIMessage.parts`, `TurnRecord.message`), and
what the framework asks of a chunk or a part is asked here, beside them (`is_content_chunk`,
`tool_part`, `approval_part`, `split_steps`, `last_step_text`, ...): nowhere else is a `type`
read or a part sliced by hand, so a protocol change is made in one module and mypy finds
every use it breaks.

A tool part is one type whose `state` changes in place, not one type per state as the SDK's
TypeScript spells it: the builder moves a part from `input-streaming` to `output-available`
key by key as the chunks arrive, which a per-state union would turn into a cast at each step.
Its keys are the union of the states' keys; a key some state lacks is `NotRequired`.
"""

# No `from __future__ import annotations`: on Python 3.11 a TypedDict's `NotRequired[...]` is
# seen at run time (`__required_keys__`, which the conformance test reads) only when unquoted.
from collections.abc import Mapping
from typing import Any, Literal, NotRequired, TypeAlias, TypedDict

ProviderMetadata: TypeAlias = dict[str, dict[str, Any]]
"""Provider-specific data, keyed by provider (`{"openai": {...}}`), passed through untouched."""

JSONValue: TypeAlias = Any
"""Any JSON value (a tool's input and output, message metadata, a data part's payload)."""

FinishReason: TypeAlias = Literal[
    "stop", "length", "content-filter", "tool-calls", "error", "interrupted", "other"
]
InputEncoding: TypeAlias = Literal["json", "text"]

TOOL_PART_PREFIX = "tool-"
"""A static tool's part type is this prefix and the tool's name: `tool-get_weather`."""
DYNAMIC_TOOL = "dynamic-tool"
"""The part type of a tool call whose tool is not known in advance; its name is `toolName`."""
DATA_PREFIX = "data-"
"""A data chunk's and a data part's type is this prefix and the data's name: `data-skipped`."""


# ---- chunks: what the stream carries, one JSON object per SSE event ----


class StartChunk(TypedDict):
    type: Literal["start"]
    messageId: NotRequired[str]
    messageMetadata: NotRequired[JSONValue]


class FinishChunk(TypedDict):
    type: Literal["finish"]
    finishReason: NotRequired[FinishReason]
    messageMetadata: NotRequired[JSONValue]


class AbortChunk(TypedDict):
    type: Literal["abort"]
    reason: NotRequired[str]


class MessageMetadataChunk(TypedDict):
    type: Literal["message-metadata"]
    messageMetadata: JSONValue


class ErrorChunk(TypedDict):
    type: Literal["error"]
    errorText: str


class StartStepChunk(TypedDict):
    type: Literal["start-step"]


class FinishStepChunk(TypedDict):
    type: Literal["finish-step"]


class ResetStepChunk(TypedDict):
    type: Literal["reset-step"]


class TextStartChunk(TypedDict):
    type: Literal["text-start"]
    id: str
    providerMetadata: NotRequired[ProviderMetadata]


class TextDeltaChunk(TypedDict):
    type: Literal["text-delta"]
    id: str
    delta: str
    providerMetadata: NotRequired[ProviderMetadata]


class TextEndChunk(TypedDict):
    type: Literal["text-end"]
    id: str
    citations: NotRequired[list[dict[str, JSONValue]]]
    providerMetadata: NotRequired[ProviderMetadata]


class ReasoningStartChunk(TypedDict):
    type: Literal["reasoning-start"]
    id: str
    providerMetadata: NotRequired[ProviderMetadata]


class ReasoningDeltaChunk(TypedDict):
    type: Literal["reasoning-delta"]
    id: str
    delta: str
    providerMetadata: NotRequired[ProviderMetadata]


class ReasoningEndChunk(TypedDict):
    type: Literal["reasoning-end"]
    id: str
    providerMetadata: NotRequired[ProviderMetadata]


class ToolInputStartChunk(TypedDict):
    type: Literal["tool-input-start"]
    toolCallId: str
    toolName: str
    inputEncoding: NotRequired[InputEncoding]
    providerExecuted: NotRequired[bool]
    providerMetadata: NotRequired[ProviderMetadata]
    toolMetadata: NotRequired[dict[str, JSONValue]]
    dynamic: NotRequired[bool]
    title: NotRequired[str]


class ToolInputDeltaChunk(TypedDict):
    type: Literal["tool-input-delta"]
    toolCallId: str
    inputTextDelta: str


class ToolInputAvailableChunk(TypedDict):
    type: Literal["tool-input-available"]
    toolCallId: str
    toolName: str
    input: JSONValue
    providerExecuted: NotRequired[bool]
    providerMetadata: NotRequired[ProviderMetadata]
    toolMetadata: NotRequired[dict[str, JSONValue]]
    dynamic: NotRequired[bool]
    title: NotRequired[str]


class ToolInputErrorChunk(TypedDict):
    type: Literal["tool-input-error"]
    toolCallId: str
    toolName: str
    input: JSONValue
    errorText: str
    providerExecuted: NotRequired[bool]
    providerMetadata: NotRequired[ProviderMetadata]
    toolMetadata: NotRequired[dict[str, JSONValue]]
    dynamic: NotRequired[bool]
    title: NotRequired[str]


class ToolApprovalRequestChunk(TypedDict):
    type: Literal["tool-approval-request"]
    approvalId: str
    toolCallId: str
    approvalDescriptor: NotRequired[JSONValue]
    inputSchemaInput: NotRequired[JSONValue]
    reason: NotRequired[str]
    isAutomatic: NotRequired[bool]
    signature: NotRequired[str]


class ToolApprovalResponseChunk(TypedDict):
    type: Literal["tool-approval-response"]
    approvalId: str
    approved: bool
    reason: NotRequired[str]
    providerExecuted: NotRequired[bool]
    providerMetadata: NotRequired[ProviderMetadata]


class ToolOutputAvailableChunk(TypedDict):
    type: Literal["tool-output-available"]
    toolCallId: str
    output: JSONValue
    providerExecuted: NotRequired[bool]
    providerMetadata: NotRequired[ProviderMetadata]
    toolMetadata: NotRequired[dict[str, JSONValue]]
    dynamic: NotRequired[bool]
    preliminary: NotRequired[bool]


class ToolOutputErrorChunk(TypedDict):
    type: Literal["tool-output-error"]
    toolCallId: str
    errorText: str
    providerExecuted: NotRequired[bool]
    providerMetadata: NotRequired[ProviderMetadata]
    toolMetadata: NotRequired[dict[str, JSONValue]]
    dynamic: NotRequired[bool]


class ToolOutputDeniedChunk(TypedDict):
    type: Literal["tool-output-denied"]
    toolCallId: str


class CustomChunk(TypedDict):
    type: Literal["custom"]
    kind: str
    providerMetadata: NotRequired[ProviderMetadata]


class SourceUrlChunk(TypedDict):
    type: Literal["source-url"]
    sourceId: str
    url: str
    title: NotRequired[str]
    providerMetadata: NotRequired[ProviderMetadata]


class SourceDocumentChunk(TypedDict):
    type: Literal["source-document"]
    sourceId: str
    mediaType: str
    title: str
    filename: NotRequired[str]
    providerMetadata: NotRequired[ProviderMetadata]


class FileChunk(TypedDict):
    type: Literal["file"]
    url: str
    mediaType: str
    providerMetadata: NotRequired[ProviderMetadata]


class ReasoningFileChunk(TypedDict):
    type: Literal["reasoning-file"]
    url: str
    mediaType: str
    providerMetadata: NotRequired[ProviderMetadata]


class SteeringMessageChunk(TypedDict):
    type: Literal["steering-message"]
    id: str
    parts: list[dict[str, JSONValue]]  # text and file parts


class DataChunk(TypedDict):
    """`data-<name>`: app data; `transient` data reaches the client but not the message."""

    type: str
    data: JSONValue
    id: NotRequired[str]
    transient: NotRequired[bool]


UIMessageChunk: TypeAlias = (
    StartChunk
    | FinishChunk
    | AbortChunk
    | MessageMetadataChunk
    | ErrorChunk
    | StartStepChunk
    | FinishStepChunk
    | ResetStepChunk
    | TextStartChunk
    | TextDeltaChunk
    | TextEndChunk
    | ReasoningStartChunk
    | ReasoningDeltaChunk
    | ReasoningEndChunk
    | ToolInputStartChunk
    | ToolInputDeltaChunk
    | ToolInputAvailableChunk
    | ToolInputErrorChunk
    | ToolApprovalRequestChunk
    | ToolApprovalResponseChunk
    | ToolOutputAvailableChunk
    | ToolOutputErrorChunk
    | ToolOutputDeniedChunk
    | CustomChunk
    | SourceUrlChunk
    | SourceDocumentChunk
    | FileChunk
    | ReasoningFileChunk
    | SteeringMessageChunk
    | DataChunk
)
"""One event of the UI message stream (the SDK's `UIMessageChunk`)."""


# ---- parts: what a stored UIMessage holds, folded from the chunks ----


class TextUIPart(TypedDict):
    type: Literal["text"]
    text: str
    state: NotRequired[Literal["streaming", "done"]]
    citations: NotRequired[list[dict[str, JSONValue]]]
    providerMetadata: NotRequired[ProviderMetadata]


class ReasoningUIPart(TypedDict):
    type: Literal["reasoning"]
    text: str
    id: NotRequired[str]
    state: NotRequired[Literal["streaming", "done"]]
    providerMetadata: NotRequired[ProviderMetadata]


# A custom or a source chunk folds into a part of exactly its fields (so does a steering
# message, below): the SDK's schemas agree, and tests/streaming/test_protocol.py checks both
# sides, so one type serves as chunk and part.
CustomUIPart: TypeAlias = CustomChunk
SourceUrlUIPart: TypeAlias = SourceUrlChunk
SourceDocumentUIPart: TypeAlias = SourceDocumentChunk


class FileUIPart(TypedDict):
    type: Literal["file"]
    mediaType: str
    url: str
    filename: NotRequired[str]
    providerReference: NotRequired[dict[str, str]]
    providerMetadata: NotRequired[ProviderMetadata]


class ReasoningFileUIPart(TypedDict):
    type: Literal["reasoning-file"]
    mediaType: str
    url: str
    providerMetadata: NotRequired[ProviderMetadata]


SteeringMessageUIPart: TypeAlias = SteeringMessageChunk


class StepStartUIPart(TypedDict):
    type: Literal["step-start"]


class DataUIPart(TypedDict):
    """`data-<name>`: a data chunk that was not transient; the same id replaces its data."""

    type: str
    data: JSONValue
    id: NotRequired[str]


ToolState: TypeAlias = Literal[
    "input-streaming",
    "input-available",
    "approval-requested",
    "approval-responded",
    "output-available",
    "output-error",
    "output-denied",
]


class ToolApproval(TypedDict):
    """A tool call's approval: requested (`id` and what the request said), then answered."""

    id: str
    approved: NotRequired[bool]
    reason: NotRequired[str]
    descriptor: NotRequired[JSONValue]
    requestReason: NotRequired[str]
    isAutomatic: NotRequired[bool]
    signature: NotRequired[str]
    inputSchemaInput: NotRequired[JSONValue]


class _ToolCallFields(TypedDict):
    """What every tool call's part holds, static or dynamic; which keys are set depends on
    `state` (an `input` once it is complete, an `output` or `errorText` once settled)."""

    toolCallId: str
    state: ToolState
    input: NotRequired[JSONValue]
    rawInput: NotRequired[JSONValue]
    inputEncoding: NotRequired[InputEncoding]
    output: NotRequired[JSONValue]
    errorText: NotRequired[str]
    approval: NotRequired[ToolApproval]
    preliminary: NotRequired[bool]
    providerExecuted: NotRequired[bool]
    callProviderMetadata: NotRequired[ProviderMetadata]
    resultProviderMetadata: NotRequired[ProviderMetadata]
    toolMetadata: NotRequired[dict[str, JSONValue]]
    title: NotRequired[str]


class ToolUIPart(_ToolCallFields):
    """A call of a known tool; its type is `tool-<name>` (see `tool_part_type`)."""

    type: str


class DynamicToolUIPart(_ToolCallFields):
    """A call of a tool not known in advance: type `dynamic-tool`, its name in `toolName`."""

    type: Literal["dynamic-tool"]
    toolName: str
    dynamic: NotRequired[Literal[False]]


UIMessagePart: TypeAlias = (
    TextUIPart
    | ReasoningUIPart
    | CustomUIPart
    | SourceUrlUIPart
    | SourceDocumentUIPart
    | FileUIPart
    | ReasoningFileUIPart
    | SteeringMessageUIPart
    | StepStartUIPart
    | DataUIPart
    | ToolUIPart
    | DynamicToolUIPart
)
"""One part of a UIMessage (the SDK's `UIMessagePart`)."""

ToolCallPart: TypeAlias = ToolUIPart | DynamicToolUIPart
"""A tool call's part, static (`tool-<name>`) or dynamic."""


class UIMessageJSON(TypedDict):
    """A UIMessage as JSON (`UIMessage.wire()`): what a turn's draft and stored message are
    (`TurnRecord.message`), folded by `MessageBuilder`."""

    id: str
    role: Literal["user", "assistant", "system"]
    parts: list[UIMessagePart]
    metadata: NotRequired[dict[str, JSONValue]]


# ---- tool parts by name: the one place a tool's name meets a part's type ----
# These take any mapping, not only the typed parts: stored parts come back from JSONB as the plain
# dicts of `UIMessage.parts`, and a part that is not a tool part must answer False, not fail.
# The predicates return `bool`, not a `TypeGuard`: narrowing such a dict to a TypedDict would
# make each later use of it as the dict it is (a hook that takes `dict[str, Any]`) a type error.


def tool_part_type(name: str) -> str:
    """The part type of a call of the static tool `name` (`get_weather` → `tool-get_weather`)."""
    return TOOL_PART_PREFIX + name


def is_static_tool_part(part: Mapping[str, Any]) -> bool:
    """A `tool-<name>` part: a call of a tool the agent (or the client) declared by name."""
    kind = part.get("type")
    return isinstance(kind, str) and kind.startswith(TOOL_PART_PREFIX)


def is_tool_part(part: Mapping[str, Any]) -> bool:
    """Any tool call's part, static (`tool-<name>`) or `dynamic-tool`."""
    return part.get("type") == DYNAMIC_TOOL or is_static_tool_part(part)


def tool_name(part: Mapping[str, Any]) -> str:
    """The name of the tool a tool part calls: `toolName` of a `dynamic-tool` part, the rest of
    the type after `tool-` otherwise. Raises `ValueError` for a part that calls no tool."""
    kind = part.get("type")
    if kind == DYNAMIC_TOOL:
        return str(part["toolName"])
    if isinstance(kind, str) and kind.startswith(TOOL_PART_PREFIX):
        return kind[len(TOOL_PART_PREFIX) :]
    raise ValueError(f"a {kind!r} part calls no tool")
