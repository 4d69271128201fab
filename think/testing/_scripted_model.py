"""The same scripts as `FakeOpenAIServer`, played in process.

For unit tests of agent logic, where an HTTP server is more machinery than the test is about.
Faults map to the `ModelError`s `OpenAIModel` would raise for them, so retry behaviour can be
tested without a network.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

from think.exceptions import ModelError
from think.models import (
    Finish,
    ModelEvent,
    ModelRequest,
    OpenAIStreamState,
    ReasoningDelta,
    TextDelta,
    ToolCallDelta,
    ToolCallStart,
    finish_reason_from_openai,
    status_error,
)
from think.testing._replies import Heard, ReplyQueue, plan_of
from think.testing._script import (
    Chunk,
    DisconnectStep,
    ErrorStep,
    RawDelta,
    Reply,
    Sleep,
    ToolArgs,
    ToolStart,
)


class ScriptedModel:
    """A `ModelClient` that answers with the given replies in order, then echoes.

    `requests` keeps every `ModelRequest` received, so a test can assert what the agent sent
    (messages, tools, metadata, `output`) as well as what it did with the answer.
    `native_output=False` makes it a model without native structured output, as an endpoint
    with `native_output: false` is, so both ways of asking for structured output can be tested.
    """

    def __init__(self, *replies: Reply, name: str = "scripted", native_output: bool = True) -> None:
        self._replies = ReplyQueue(replies)
        self._name = name
        self._native_output = native_output
        self.requests: list[ModelRequest] = []

    @property
    def name(self) -> str:
        return self._name

    @property
    def supports_native_output(self) -> bool:
        return self._native_output

    @property
    def calls(self) -> int:
        return len(self.requests)

    @property
    def pending(self) -> int:
        """Replies not played yet: a test can assert the agent used all it was given."""
        return self._replies.pending

    def script(self, *replies: Reply) -> None:
        self._replies.add(replies)

    def __repr__(self) -> str:
        return f"ScriptedModel(pending={self.pending}, calls={self.calls})"

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        self.requests.append(request)
        plan = plan_of(self._replies.take(), Heard.of(request.messages))
        raw = OpenAIStreamState()  # a raw delta is read as the OpenAI adapter reads one
        for action in plan.actions:
            if isinstance(action, Sleep):
                await asyncio.sleep(action.seconds)
            elif isinstance(action, ErrorStep):
                raise status_error(self._name, action.status, action.message)
            elif isinstance(action, DisconnectStep):
                raise ModelError(f"model {self._name} disconnected mid-stream", retryable=True)
            elif isinstance(action, Chunk):
                yield (
                    TextDelta(delta=action.text)
                    if action.kind == "text"
                    else ReasoningDelta(delta=action.text)
                )
            elif isinstance(action, ToolStart):
                yield ToolCallStart(tool_call_id=action.id, tool_name=action.name)
            elif isinstance(action, ToolArgs):
                yield ToolCallDelta(tool_call_id=action.id, delta=action.fragment)
            elif isinstance(action, RawDelta):
                delta = json.loads(action.delta) if isinstance(action.delta, str) else action.delta
                for event in raw.feed({"choices": [{"index": 0, "delta": delta}]}):
                    yield event
        for event in raw.flush():
            yield event
        yield Finish(finish_reason=finish_reason_from_openai(plan.finish_reason), usage=plan.usage)
