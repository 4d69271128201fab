"""Models: one streaming interface, and the adapters behind it.

An agent names its model with a string (`"gpt-4o"`, `"qwen2.5:7b"`) or hands over a
`ModelClient`; `resolve_model` turns the string into a client from the deployment's settings, so
the same agent code runs offline in `think dev` and against a real endpoint in production.
"""

from __future__ import annotations

from think._settings import Settings
from think.models._base import (
    Finish,
    FinishReason,
    ModelClient,
    ModelEvent,
    ModelRequest,
    ReasoningDelta,
    TextDelta,
    ToolCallDelta,
    ToolCallStart,
    ToolSpec,
    Usage,
)
from think.models._offline import OfflineModel
from think.models._openai import OpenAIModel, close_openai_clients

__all__ = [
    "Finish",
    "FinishReason",
    "ModelClient",
    "ModelEvent",
    "ModelRequest",
    "OfflineModel",
    "OpenAIModel",
    "ReasoningDelta",
    "TextDelta",
    "ToolCallDelta",
    "ToolCallStart",
    "ToolSpec",
    "Usage",
    "close_openai_clients",
    "resolve_model",
]


def resolve_model(spec: str | ModelClient, settings: Settings) -> ModelClient:
    """The client for an agent's model.

    A string means "this model on the configured endpoint": it becomes an `OpenAIModel` when
    `OPENAI_BASE_URL` or `OPENAI_API_KEY` is set (a local vLLM or Ollama needs no key), and the
    `OfflineModel` otherwise, so nothing fails just because no provider is set up yet. The
    spec `"offline"` always means the offline model; an `openai:` prefix is accepted, mirroring
    `OpenAIModel.name`.
    """
    if not isinstance(spec, str):
        return spec
    model = spec.removeprefix("openai:")
    if model == "offline" or not (settings.openai_base_url or settings.openai_api_key):
        return OfflineModel()
    return OpenAIModel(model, base_url=settings.openai_base_url, api_key=settings.openai_api_key)
