"""Scripted model replies: what a fake model answers, and how it misbehaves.

A `Reply` is a list of steps played in order. Build one from the helpers and join them with
`+`, which reads like the stream it produces::

    text("Let me check.") + tool_call("get_weather", {"city": "Paris"})
    reasoning("The user greets me.") + text("Hello", " there", "!")
    stall(2.0) + text("slow start")
    text("half an answer") + disconnect()
    error(429, "slow down")
    reply(text("cut short"), finish_reason="length", delay=0.01)
    content_parts({"type": "text", "text": "Hi"})     # Mistral's list-typed `content`
    raw_delta({"content": "a\\x00b"})                 # any delta, as given

The same script plays over real HTTP (`FakeOpenAIServer`, exercising the OpenAI SDK and
`OpenAIModel`) and in process (`ScriptedModel`), so a unit test and an end-to-end test can share
their scripts.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field

from think.models import Usage, word_chunks

OpenAIFinishReason = Literal["stop", "length", "tool_calls", "content_filter", "function_call"]

_ERROR_DEFAULTS: dict[int, tuple[str, str]] = {
    400: ("Invalid request.", "invalid_request_error"),
    401: ("Incorrect API key provided.", "invalid_request_error"),
    403: ("You are not allowed to use this model.", "invalid_request_error"),
    404: ("The model does not exist.", "invalid_request_error"),
    408: ("Request timed out.", "timeout"),
    429: ("Rate limit reached. Please try again later.", "requests"),
}


class TextStep(BaseModel):
    kind: Literal["text"] = "text"
    chunks: list[str]


class ReasoningStep(BaseModel):
    kind: Literal["reasoning"] = "reasoning"
    chunks: list[str]


class ToolCallStep(BaseModel):
    kind: Literal["tool_call"] = "tool_call"
    name: str
    arguments: dict[str, Any] | str = Field(default_factory=dict)
    """A dict is sent as JSON; a string is sent verbatim, to script malformed arguments."""
    id: str | None = None
    """None: a fresh `call_...` id each time the reply is played, as a real model would."""
    fragments: int = 3
    """How many pieces the arguments are streamed in."""


class ErrorStep(BaseModel):
    """First step: an HTTP error response. After output began: an `error` event in the stream."""

    kind: Literal["error"] = "error"
    status: int = 500
    message: str = "The server had an error while processing your request."
    type: str = "server_error"
    code: str | None = None
    retry_after: str | None = None
    """Sent as the answer's `Retry-After` header (a first-step error only), as OpenAI's 429s
    carry one."""


class RawStep(BaseModel):
    """A streamed chunk whose `delta` is exactly this, for what the helpers cannot say: a
    server's own shapes (Mistral's list-typed `content`), or hostile content. A dict is sent
    as JSON (so `"\\x00"` and `"\\ud800"` go out as the escapes `\\u0000` and `\\ud800`, as
    a real server's would); a string is sent verbatim as the delta's JSON text."""

    kind: Literal["raw"] = "raw"
    delta: dict[str, Any] | str


class StallStep(BaseModel):
    kind: Literal["stall"] = "stall"
    seconds: float


class DisconnectStep(BaseModel):
    """Drop the connection without finishing the response, like a crashed or restarted server."""

    kind: Literal["disconnect"] = "disconnect"


Step = Annotated[
    TextStep | ReasoningStep | ToolCallStep | RawStep | ErrorStep | StallStep | DisconnectStep,
    Field(discriminator="kind"),
]


class Reply(BaseModel):
    """One scripted model response.

    `finish_reason` defaults to `tool_calls` when the reply calls a tool and `stop` otherwise;
    `usage` defaults to a deterministic estimate from the request; `delay` is slept before every
    streamed chunk, to make a reply realistically slow without scripting each pause. `burst`
    sends the whole streamed response in one write, as a cached or very fast model's arrives,
    so the client reads all of it at once (`FakeOpenAIServer` only; without it each chunk is
    its own write, which a client may or may not read together).
    """

    steps: list[Step] = Field(default_factory=list)
    finish_reason: OpenAIFinishReason | None = None
    usage: Usage | None = None
    delay: float = 0.0
    burst: bool = False
    continues: bool = False
    """Played as a model continues an answer it began: for a call whose transcript ends with
    an assistant message whose text this reply's text begins with (a partial answer kept after
    a crash), only the rest of its text is streamed (nothing, when the partial was all of it).
    """

    def __add__(self, other: Reply) -> Reply:
        return Reply(
            steps=[*self.steps, *other.steps],
            finish_reason=other.finish_reason or self.finish_reason,
            usage=other.usage or self.usage,
            delay=max(self.delay, other.delay),
            burst=self.burst or other.burst,
            continues=self.continues or other.continues,
        )

    def continued_after(self, begun: str) -> Reply:
        """What is left to say once `begun` was said: this reply with its text steps' chunks
        that `begun` holds taken out (a chunk `begun` ends inside of is cut where it ends).
        Itself when `begun` is not how its text begins."""
        said = "".join(c for s in self.steps if isinstance(s, TextStep) for c in s.chunks)
        if not begun or not said.startswith(begun):
            return self
        left = len(begun)
        steps: list[Step] = []
        for step in self.steps:
            if isinstance(step, TextStep) and left > 0:
                chunks = []
                for chunk in step.chunks:
                    if left >= len(chunk):
                        left -= len(chunk)
                    else:
                        chunks.append(chunk[left:])
                        left = 0
                if chunks:
                    steps.append(step.model_copy(update={"chunks": chunks}))
            else:
                steps.append(step)
        return self.model_copy(update={"steps": steps})


def text(*chunks: str) -> Reply:
    """Assistant text. One string is streamed word by word; several are streamed as given."""
    return Reply(steps=[TextStep(chunks=_chunks(chunks))])


def reasoning(*chunks: str) -> Reply:
    """Reasoning text, sent as `reasoning_content` the way vLLM and DeepSeek stream it."""
    return Reply(steps=[ReasoningStep(chunks=_chunks(chunks))])


def tool_call(
    name: str,
    arguments: dict[str, Any] | str | None = None,
    *,
    id: str | None = None,
    fragments: int = 3,
) -> Reply:
    """A tool call; several in one reply are parallel calls (`index` 0, 1, ...)."""
    return Reply(
        steps=[
            ToolCallStep(name=name, arguments=arguments or {}, id=id, fragments=max(1, fragments))
        ]
    )


def error(
    status: int = 500,
    message: str | None = None,
    *,
    type: str | None = None,
    code: str | None = None,
    retry_after: str | None = None,
) -> Reply:
    """Fail with an OpenAI-shaped error body: `{"error": {"message", "type", "param", "code"}}`,
    and a `Retry-After` header when `retry_after` is given."""
    default_message, default_type = _ERROR_DEFAULTS.get(
        status, ("The server had an error while processing your request.", "server_error")
    )
    return Reply(
        steps=[
            ErrorStep(
                status=status,
                message=message or default_message,
                type=type or default_type,
                code=code,
                retry_after=retry_after,
            )
        ]
    )


def raw_delta(delta: dict[str, Any] | str) -> Reply:
    """One streamed chunk with this `delta`, as given (`RawStep`)."""
    return Reply(steps=[RawStep(delta=delta)])


def raw_events(*events: dict[str, Any] | str) -> Reply:
    """A Responses API stream exactly as given, for `FakeResponsesServer`: each event a dict
    (sent as `event: <type>` and its JSON, with no `sequence_number` but its own) or the text
    of one SSE frame, sent verbatim (a server's `data: {"error": ...}` with no event name).
    The fake adds nothing of its own, not even `response.completed`: the stream ends where the
    events do, as another server's would (tests/models/test_responses_streams.py)."""
    return Reply(steps=[RawStep(delta=event) for event in events])


def content_parts(*parts: dict[str, Any]) -> Reply:
    """`content` as a list of parts, the way Mistral's reasoning models stream it:
    `{"type": "text", "text": ...}` for text, `{"type": "thinking", "thinking": [{"type":
    "text", "text": ...}]}` for reasoning."""
    return raw_delta({"content": list(parts)})


def stall(seconds: float) -> Reply:
    """Pause. Response headers are always sent first, so this stalls the body, not the connect."""
    return Reply(steps=[StallStep(seconds=seconds)])


def disconnect() -> Reply:
    return Reply(steps=[DisconnectStep()])


def reply(
    *parts: Reply,
    finish_reason: OpenAIFinishReason | None = None,
    usage: Usage | None = None,
    delay: float | None = None,
    burst: bool | None = None,
    continues: bool | None = None,
) -> Reply:
    """Join parts and set what the helpers cannot: `reply(text("..."), finish_reason="length")`."""
    joined = sum(parts, Reply())
    return joined.model_copy(
        update={
            "finish_reason": finish_reason or joined.finish_reason,
            "usage": usage or joined.usage,
            "delay": joined.delay if delay is None else delay,
            "burst": joined.burst if burst is None else burst,
            "continues": joined.continues if continues is None else continues,
        }
    )


def echo(last_user_text: str) -> Reply:
    """What the fakes answer when nothing is scripted: deterministic, and shows what they got."""
    return text(f"echo: {last_user_text}")


def _chunks(chunks: tuple[str, ...]) -> list[str]:
    return word_chunks(chunks[0]) if len(chunks) == 1 else [c for c in chunks if c]


# The reply compiled into a flat list of actions: both fakes play this, so they cannot drift.


@dataclass(frozen=True)
class Chunk:
    kind: Literal["text", "reasoning"]
    text: str


@dataclass(frozen=True)
class ToolStart:
    index: int
    id: str
    name: str


@dataclass(frozen=True)
class ToolArgs:
    index: int
    id: str
    fragment: str


@dataclass(frozen=True)
class RawDelta:
    delta: dict[str, Any] | str


@dataclass(frozen=True)
class Sleep:
    seconds: float


Action = Chunk | ToolStart | ToolArgs | RawDelta | Sleep | ErrorStep | DisconnectStep


@dataclass(frozen=True)
class Plan:
    actions: list[Action]
    finish_reason: OpenAIFinishReason
    usage: Usage
    text: str
    reasoning: str
    tool_calls: list[tuple[str, str, str]]
    """(id, name, arguments JSON), for non-streaming responses."""
    burst: bool = False


def compile_reply(script: Reply, input_tokens: int) -> Plan:
    actions: list[Action] = []
    calls: list[tuple[str, str, str]] = []
    outputs = 0

    def emit(action: Chunk | ToolStart | ToolArgs | RawDelta) -> None:
        nonlocal outputs
        if script.delay > 0 and not isinstance(action, ToolStart):
            actions.append(Sleep(script.delay))
        actions.append(action)
        outputs += 1

    for step in script.steps:
        if isinstance(step, TextStep | ReasoningStep):
            for piece in step.chunks:
                emit(Chunk(step.kind, piece))
        elif isinstance(step, ToolCallStep):
            call_id = step.id or f"call_{uuid.uuid4().hex[:24]}"
            args = step.arguments if isinstance(step.arguments, str) else json.dumps(step.arguments)
            index = len(calls)
            calls.append((call_id, step.name, args))
            emit(ToolStart(index, call_id, step.name))
            for fragment in _split(args, step.fragments):
                emit(ToolArgs(index, call_id, fragment))
        elif isinstance(step, RawStep):
            emit(RawDelta(step.delta))
        elif isinstance(step, StallStep):
            actions.append(Sleep(step.seconds))
        else:
            actions.append(step)
    chunks = [a for a in actions if isinstance(a, Chunk)]
    return Plan(
        actions=actions,
        finish_reason=script.finish_reason or ("tool_calls" if calls else "stop"),
        usage=script.usage or Usage(input_tokens=input_tokens, output_tokens=max(outputs, 1)),
        text="".join(c.text for c in chunks if c.kind == "text"),
        reasoning="".join(c.text for c in chunks if c.kind == "reasoning"),
        tool_calls=calls,
        burst=script.burst,
    )


def _split(value: str, pieces: int) -> list[str]:
    size = max(1, -(-len(value) // pieces))
    return [value[i : i + size] for i in range(0, len(value), size)] or [""]
