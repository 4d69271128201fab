"""Test agents the way Think tests itself: against scripted models that can also misbehave.

Two players share one script language (`text`, `reasoning`, `tool_call`, `error`, `stall`,
`disconnect`, `raw_delta`, `content_parts`, `raw_events`, joined with `+`):

- `FakeOpenAIServer`, a real OpenAI-compatible HTTP server, for end-to-end tests through the
  OpenAI SDK, the worker and the gateway. Point `OPENAI_BASE_URL` at its `base_url` and script
  replies per conversation.
- `FakeAnthropicServer`, the same for Anthropic's Messages API (an endpoint with
  `"api": "anthropic"` and its `base_url`): the same scripts, played as its event stream.
- `FakeResponsesServer`, the same for OpenAI's Responses API (an endpoint with
  `"api": "responses"`), background mode and streaming a response again included.
- `ScriptedModel`, an in-process `ModelClient`, for unit tests of agent logic.
"""

from __future__ import annotations

from think.testing._fake_anthropic import FakeAnthropicServer
from think.testing._fake_openai import CONVERSATION_HEADER, FakeOpenAIServer, RecordedRequest
from think.testing._fake_responses import FakeResponsesServer
from think.testing._script import (
    DisconnectStep,
    ErrorStep,
    RawStep,
    ReasoningStep,
    Reply,
    StallStep,
    Step,
    TextStep,
    ToolCallStep,
    content_parts,
    disconnect,
    echo,
    error,
    raw_delta,
    raw_events,
    reasoning,
    reply,
    stall,
    text,
    tool_call,
)
from think.testing._scripted_model import ScriptedModel

__all__ = [
    "CONVERSATION_HEADER",
    "DisconnectStep",
    "ErrorStep",
    "FakeAnthropicServer",
    "FakeOpenAIServer",
    "FakeResponsesServer",
    "RawStep",
    "ReasoningStep",
    "RecordedRequest",
    "Reply",
    "ScriptedModel",
    "StallStep",
    "Step",
    "TextStep",
    "ToolCallStep",
    "content_parts",
    "disconnect",
    "echo",
    "error",
    "raw_delta",
    "raw_events",
    "reasoning",
    "reply",
    "stall",
    "text",
    "tool_call",
]
