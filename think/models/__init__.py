"""Models: one streaming interface, and the adapters behind it.

An agent names its model with a string (`"gpt-4o"`, `"qwen2.5:7b"`) or hands over a
`ModelClient`; `resolve_model` turns the string into a client from the deployment's settings, so
the same agent code runs offline in `think dev` and against a real endpoint in production.
Structured output is asked for with an `OutputSpec` (`output_spec`) and checked with
`validate_output`.
"""

from __future__ import annotations

from typing import Any

from think._settings import Endpoint, Settings
from think.exceptions import ConfigurationError, UserError
from think.models._anthropic import AnthropicModel, AnthropicStreamState, close_anthropic_clients
from think.models._base import (
    Checkpoint,
    EncodedMessages,
    Finish,
    FinishReason,
    ModelClient,
    ModelEvent,
    ModelRequest,
    OutputSpec,
    ReasoningDelta,
    TextDelta,
    ToolCallDelta,
    ToolCallStart,
    ToolSpec,
    Usage,
    supports_native_output,
)
from think.models._call_settings import ModelSettings, ReasoningEffort
from think.models._fallback import FallbackModel, answering, chain_of, falls_back
from think.models._gateway import Gateway, GatewayFor
from think.models._offline import (
    OfflineModel,
    estimate_tokens,
    last_user_text,
    message_text,
    word_chunks,
)
from think.models._openai import (
    METADATA_HEADER_PREFIX,
    OpenAIModel,
    OpenAIStreamState,
    close_openai_clients,
    finish_reason_from_openai,
    metadata_headers,
    status_error,
)
from think.models._output import Output, output_spec, strict_json_schema, validate_output
from think.models._overflow import (
    ChatErrorClass,
    classify_model_error,
    default_context_overflow_classifier,
)
from think.models._prices import cost_of, warm_price_table
from think.models._responses import ResponsesModel, ResponsesStreamState
from think.models._transcript import (
    ByIdentity,
    Repair,
    converted,
    interrupted_tool_error,
    is_media,
    to_chat_messages,
)
from think.models._warm import warm_model_sdks

__all__ = [
    "METADATA_HEADER_PREFIX",
    "AnthropicModel",
    "AnthropicStreamState",
    "ByIdentity",
    "ChatErrorClass",
    "Checkpoint",
    "EncodedMessages",
    "Endpoint",
    "FallbackModel",
    "Finish",
    "FinishReason",
    "Gateway",
    "GatewayFor",
    "ModelClient",
    "ModelEvent",
    "ModelRequest",
    "ModelSettings",
    "ModelSpec",
    "OfflineModel",
    "OpenAIModel",
    "OpenAIStreamState",
    "Output",
    "OutputSpec",
    "ReasoningDelta",
    "ReasoningEffort",
    "Repair",
    "ResponsesModel",
    "ResponsesStreamState",
    "TextDelta",
    "ToolCallDelta",
    "ToolCallStart",
    "ToolSpec",
    "Usage",
    "answering",
    "chain_of",
    "classify_model_error",
    "close_model_clients",
    "close_openai_clients",
    "converted",
    "cost_of",
    "default_context_overflow_classifier",
    "estimate_tokens",
    "falls_back",
    "finish_reason_from_openai",
    "interrupted_tool_error",
    "is_media",
    "last_user_text",
    "message_text",
    "output_spec",
    "resolve_model",
    "status_error",
    "strict_json_schema",
    "supports_native_output",
    "to_chat_messages",
    "validate_output",
    "warm_model_sdks",
    "warm_price_table",
    "word_chunks",
]


ModelSpec = str | ModelClient | list[str] | list[str | ModelClient]
"""How an agent names its model: an id, a client, or a list of them (a fallback chain)."""


def resolve_model(
    spec: ModelSpec, settings: Settings, *, start: int = 0, gateway: GatewayFor | None = None
) -> ModelClient:
    """The client for an agent's model.

    A list is a fallback chain (`FallbackModel`), its order beginning at `start`; a list of
    one is that model. `gateway` (the agent's `get_gateway`) is asked about each model id: it
    may pick the endpoint and add headers, metadata and a timeout. A client is used as it is.

    A string means "this model on the configured endpoint": it becomes an `OpenAIModel` when
    `OPENAI_BASE_URL` or `OPENAI_API_KEY` is set (a local vLLM or Ollama needs no key), and the
    `OfflineModel` otherwise, so nothing fails just because no provider is set up yet. The
    spec `"offline"` always means the offline model; an `openai:` prefix is accepted, mirroring
    `OpenAIModel.name`.

    `"<endpoint>/<model>"` means the model on a named endpoint of `THINK_MODEL_ENDPOINTS`
    (`"cheap/gpt-4o-mini"`), whether or not a default endpoint is set. Only configured names
    count: model ids have slashes of their own (`"meta-llama/Llama-3.1-8B-Instruct"`), and those
    go to the default endpoint whole.
    """
    if isinstance(spec, list):
        if not spec:
            raise UserError("an empty list of models: name at least one")
        models = [resolve_model(s, settings, gateway=gateway) for s in spec]
        return models[0] if len(models) == 1 else FallbackModel(models, start=start)
    if not isinstance(spec, str):
        if not isinstance(spec, ModelClient):
            raise UserError(f"model {spec!r} is neither a model id nor a ModelClient")
        return spec
    model = spec.removeprefix("openai:")
    if model == "offline":
        return OfflineModel()
    chosen = gateway(spec) if gateway is not None else None
    if chosen is not None and chosen.endpoint is not None:
        model = _on_endpoint(spec, model, chosen.endpoint, settings)
    headers = _gateway_headers(chosen)
    timeout = chosen.timeout if chosen is not None else None
    prefix, slash, rest = model.partition("/")
    endpoint = settings.model_endpoints.get(prefix) if slash and rest else None
    if endpoint is not None:
        if endpoint.api_key_env and not endpoint.api_key:
            raise ConfigurationError(
                f"model {spec!r} uses endpoint {prefix!r}, whose API key is read from "
                f"{endpoint.api_key_env}, and {endpoint.api_key_env} is not set in this process"
            )
        # What every adapter takes from its endpoint.
        common: dict[str, Any] = {
            "base_url": endpoint.base_url,
            "api_key": endpoint.api_key,
            "endpoint": prefix,
            "api_key_env": endpoint.api_key_env,
            "prices": endpoint.prices,
            "price_provider": endpoint.price_provider,
            "extra_headers": headers,
            "timeout": timeout,
        }
        if endpoint.api == "anthropic":
            return AnthropicModel(rest, **common)
        if endpoint.api == "responses":
            return ResponsesModel(
                rest,
                store=bool(endpoint.store),
                background=endpoint.background,
                native_output=endpoint.native_output,
                **common,
            )
        return OpenAIModel(
            rest, native_output=endpoint.native_output, think_tags=endpoint.think_tags, **common
        )
    if not (settings.openai_base_url or settings.openai_api_key):
        return OfflineModel()
    return OpenAIModel(
        model,
        base_url=settings.openai_base_url,
        api_key=settings.openai_api_key,
        native_output=settings.native_structured_output,
        api_key_env="OPENAI_API_KEY",  # the variable Settings reads it from
        extra_headers=headers,
        timeout=timeout,
    )


def _on_endpoint(spec: str, model: str, endpoint: str, settings: Settings) -> str:
    """`model` on `endpoint` (a gateway's pick), replacing an endpoint prefix it names."""
    if endpoint not in settings.model_endpoints:
        known = ", ".join(sorted(settings.model_endpoints)) or "none"
        raise ConfigurationError(
            f"get_gateway picked endpoint {endpoint!r} for model {spec!r}, and "
            f"THINK_MODEL_ENDPOINTS has no endpoint of that name (it has: {known})"
        )
    prefix, slash, rest = model.partition("/")
    if slash and rest and prefix in settings.model_endpoints:
        model = rest
    return f"{endpoint}/{model}"


def _gateway_headers(gateway: Gateway | None) -> dict[str, str]:
    if gateway is None:
        return {}
    return {**gateway.headers, **metadata_headers(gateway.metadata)}


async def close_model_clients() -> None:
    """Close this event loop's pooled connections of every adapter (a worker's shutdown)."""
    await close_openai_clients()
    await close_anthropic_clients()
