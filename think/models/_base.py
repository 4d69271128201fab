"""The one interface every model sits behind.

The turn loop never sees a provider SDK: it hands a `ModelRequest` to a `ModelClient` and reads
typed `ModelEvent`s back. That keeps the offline model, the OpenAI-compatible adapter and the
scripted test model interchangeable, and keeps provider quirks out of the activities.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from think.models._call_settings import ModelSettings


class ToolSpec(BaseModel):
    """A tool as the model sees it: a name, what it is for, and a JSON Schema for its input."""

    name: str
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})


class OutputSpec(BaseModel):
    """The shape the final answer must take: a named JSON Schema.

    A client that supports native structured output (`supports_native_output`) makes the
    provider produce exactly this (OpenAI's `response_format` of type `json_schema`); the others
    ignore it, and the caller asks for the answer through a final-answer tool instead.
    `strict` is OpenAI's strict mode, which needs every object closed and every property
    required: `think.models.output_spec` turns it on only for schemas that allow it. Build one
    with `output_spec(SomeModel)`; validate the answer with `validate_output`.

    The schema is the field `json_schema`, passed and serialized as `schema` (a field named
    `schema` would shadow `BaseModel.schema`).
    """

    model_config = ConfigDict(frozen=True, serialize_by_alias=True)

    name: str
    json_schema: dict[str, Any] = Field(alias="schema")
    strict: bool = True


@dataclass(frozen=True)
class EncodedMessages:
    """`ModelRequest.messages[start:end]`, already encoded as JSON: the objects joined by
    commas, without brackets (empty for no messages).

    A worker keeps each conversation's history encoded as it converts it
    (`think.sessions._chat_history`): at turn 1,000 encoding the whole transcript again took
    3.5 ms of every step, its 4,000 messages scattered over the heap. A client that posts JSON
    (`OpenAIModel`) sends these bytes instead; any other ignores them."""

    start: int
    end: int
    json: bytes


class ModelRequest(BaseModel):
    """One model call.

    `messages` are in the OpenAI Chat Completions shape (`{"role": ..., "content": ...}`,
    assistant `tool_calls`, `tool` results), because that is the lingua franca every
    OpenAI-compatible server accepts; the session layer converts UIMessages into it.
    `metadata` travels as request headers so that a proxy, or the scripted test server, can tell
    which conversation and turn a call belongs to. `output`, when set, asks for the answer in that
    shape; a client whose `supports_native_output` is false ignores it. `settings` are the
    call settings (`ModelSettings`), which each client puts in its own API's terms.

    A client reads `messages` and never changes them: a worker shares them between the
    steps of a conversation (`think.sessions._chat_history`). `encoded`, when set, is a run of
    them already encoded as JSON.
    """

    model: str
    messages: list[dict[str, Any]]
    tools: list[ToolSpec] = Field(default_factory=list)
    metadata: dict[str, str] = Field(default_factory=dict)
    output: OutputSpec | None = None
    settings: ModelSettings = Field(default_factory=ModelSettings)
    encoded: EncodedMessages | None = Field(default=None, exclude=True, repr=False)
    resume: dict[str, Any] | None = None
    """A `Checkpoint` an earlier attempt of this step recorded: a client that wrote it picks
    that answer up instead of asking again; any other ignores it."""


class Usage(BaseModel):
    """A model call's tokens. `input_tokens` counts every input token, the cached and the
    cache-written ones included (OpenAI's convention, which `genai-prices` prices by);
    `output_tokens` counts the reasoning ones."""

    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0
    cache_write_tokens: int = 0
    reasoning_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens


class TextDelta(BaseModel):
    type: Literal["text"] = "text"
    delta: str


class ReasoningDelta(BaseModel):
    """Reasoning text. `provider_metadata` is what the provider must be handed back with it
    on a later call, in the AI SDK's `providerMetadata` shape (Anthropic's thinking-block
    signature: `{"anthropic": {"signature": ...}}`): stored on the message's reasoning part,
    and sent back by the transcript (`thinking_blocks`) to the adapter that reads it."""

    type: Literal["reasoning"] = "reasoning"
    delta: str
    provider_metadata: dict[str, dict[str, Any]] | None = None


class ToolCallStart(BaseModel):
    """The model began a tool call; its arguments follow as `ToolCallDelta`s."""

    type: Literal["tool-call-start"] = "tool-call-start"
    tool_call_id: str
    tool_name: str


class ToolCallDelta(BaseModel):
    type: Literal["tool-call-delta"] = "tool-call-delta"
    tool_call_id: str
    delta: str


class Checkpoint(BaseModel):
    """Where this answer can be picked up again without asking the model anew: a response the
    provider keeps running and can stream again (OpenAI's background mode). The step records
    the latest one; an attempt that replaces a dead one hands it back as `ModelRequest.resume`.
    `resume` is the client's own, and names the client (`name`) so that no other takes it."""

    type: Literal["checkpoint"] = "checkpoint"
    resume: dict[str, Any]


FinishReason = Literal["stop", "length", "tool-calls", "content-filter", "error", "other"]


class Finish(BaseModel):
    """Always the last event of a successful stream."""

    type: Literal["finish"] = "finish"
    finish_reason: FinishReason = "stop"
    usage: Usage = Field(default_factory=Usage)


ModelEvent = Annotated[
    TextDelta | ReasoningDelta | ToolCallStart | ToolCallDelta | Checkpoint | Finish,
    Field(discriminator="type"),
]


@runtime_checkable
class ModelClient(Protocol):
    """Anything that streams a model's answer to a request.

    Implementations raise `think.exceptions.ModelError` (with `retryable` set) for provider
    failures; they never retry on their own, because Temporal owns retries.

    One optional member: `supports_native_output: bool`, true when the client honours
    `ModelRequest.output` itself (OpenAI's `response_format`). It is not part of the protocol, so
    that clients written before it still type-check and still pass `isinstance`: read it with
    `supports_native_output(model)`, which counts a client without it as false (the turn then
    asks for structured output through a final-answer tool).
    """

    @property
    def name(self) -> str:
        """A short label for logs, the Temporal UI and `GET /v1/agents` (e.g. `openai:gpt-4o`)."""
        ...

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        """Yield the answer as events, ending with exactly one `Finish`."""
        ...


def supports_native_output(model: ModelClient) -> bool:
    """Whether `model` produces `ModelRequest.output` natively; false when it does not say."""
    return getattr(model, "supports_native_output", False) is True
