"""Call settings in Chat Completions' terms.

Most names are the same on every OpenAI-compatible server; two are not. OpenAI's own API (and
Azure OpenAI's) takes the output limit as `max_completion_tokens` and refuses `max_tokens` for
its reasoning models, while vLLM, Ollama, llama.cpp, LiteLLM and most proxies read
`max_tokens` (some of them only that). `tool_choice` naming a tool is an object, and
`tool_choice` and `parallel_tool_calls` mean nothing without tools: a server that validates
strictly (OpenAI) refuses them there, so they are only sent with tools.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

from think.exceptions import ModelError
from think.models._base import ToolSpec
from think.models._call_settings import TOOL_CHOICE_MODES, ModelSettings

_OPENAI_HOSTS = ("api.openai.com",)
_OPENAI_HOST_SUFFIXES = (".openai.azure.com", ".cognitiveservices.azure.com")


def takes_max_completion_tokens(base_url: str) -> bool:
    """Whether the server is OpenAI's (or Azure OpenAI's), which names the output limit
    `max_completion_tokens`."""
    host = (urlsplit(base_url).hostname or "").lower()
    return host in _OPENAI_HOSTS or host.endswith(_OPENAI_HOST_SUFFIXES)


def chat_settings(
    settings: ModelSettings, tools: Sequence[ToolSpec], *, model: str, base_url: str
) -> dict[str, Any]:
    """The request fields `settings` make, `provider_options` last. Raises a non-retryable
    `ModelError` for a `tool_choice` that cannot be honoured (a tool the step does not offer,
    or a tool required where there are none): sending it would be refused by the server, or
    worse, ignored by it."""
    fields: dict[str, Any] = {}
    for name in ("temperature", "top_p", "seed", "stop", "reasoning_effort"):
        value = getattr(settings, name)
        if value is not None:
            fields[name] = value
    if settings.max_output_tokens is not None:
        limit = "max_completion_tokens" if takes_max_completion_tokens(base_url) else "max_tokens"
        fields[limit] = settings.max_output_tokens
    if settings.tool_choice is not None:
        choice = tool_choice(settings.tool_choice, tools, model)
        if choice is not None:
            fields["tool_choice"] = choice
    if settings.parallel_tool_calls is not None and tools:
        fields["parallel_tool_calls"] = settings.parallel_tool_calls
    if settings.provider_options:
        fields.update(settings.provider_options)
    return fields


def tool_choice(choice: str, tools: Sequence[ToolSpec], model: str) -> str | dict[str, Any] | None:
    """`tool_choice` as Chat Completions takes it; None when there is nothing to send (no tools,
    and a choice that asks for none or leaves it to the model)."""
    names = [t.name for t in tools]
    if choice in TOOL_CHOICE_MODES:
        if not tools:
            if choice == "required":
                raise ModelError(
                    f"tool_choice 'required' for model {model}, but the step offers no tools",
                    retryable=False,
                    kind="refused",
                )
            return None
        return choice
    if choice not in names:
        offered = ", ".join(sorted(names)) or "none"
        raise ModelError(
            f"tool_choice {choice!r} for model {model} names no tool of the step (it offers: "
            f"{offered}); use 'auto', 'none', 'required' or one of those names",
            retryable=False,
            kind="refused",
        )
    return {"type": "function", "function": {"name": choice}}
