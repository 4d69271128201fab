"""A model behind Anthropic's Messages API, on the official `anthropic` SDK.

The turn hands every adapter the transcript in Chat Completions' shape (`ModelRequest`); this
one puts it in the Messages API's: the system prompt apart, one message per role in turn (tool
results are the user's `tool_result` blocks, several merged into one message), tool calls as
`tool_use` blocks with parsed input, images as `image` blocks. It marks the stable prefix for
the prompt cache (`cache_control` on the system prompt and on the last block before the newest
message), so each step of a tool loop, and each turn, reads the conversation from the cache and
pays full price only for what is new.

Streamed events become the turn's: text, `thinking` as reasoning, `tool_use` blocks as tool
calls whose input arrives as JSON fragments. Usage counts every input token (the cached and
the cache-written ones included, as OpenAI's does) with the cache reads and writes apart.
Anthropic's stop reasons and errors (its 529 `overloaded_error`, errors sent mid-stream) map to
the turn's. A thinking block's signature (or a redacted block's data) is kept on the stored
reasoning part as `providerMetadata.anthropic`, as the AI SDK keeps it, and handed back as the
block it was on later calls (the transcript's `thinking_blocks`).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Sequence
from decimal import Decimal
from typing import TYPE_CHECKING, Any, cast

from think._settings import Prices
from think.exceptions import ModelError
from think.models._base import (
    Finish,
    FinishReason,
    ModelEvent,
    ModelRequest,
    ReasoningDelta,
    TextDelta,
    ToolCallDelta,
    ToolCallStart,
    ToolSpec,
    Usage,
)
from think.models._call_settings import ModelSettings
from think.models._chat_settings import tool_choice as chat_tool_choice
from think.models._openai import (
    PLACEHOLDER_API_KEY,
    connection_failure,
    metadata_headers,
    retryable_status,
    whose_key,
)
from think.models._prices import listed_cost, published_cost
from think.models._warm import sdk_ready

if TYPE_CHECKING:
    # Imported where a request is made, not here: `anthropic` (its types package imports every
    # beta type) took 2.8 s to import, which every process that imports `think.models` paid,
    # whether or not an endpoint speaks Anthropic's API.
    import anthropic
    from anthropic._types import RequestOptions

_FAMILIES: tuple[tuple[str, int, int], ...] = (
    ("claude-3-haiku", 4_096, 4_096),
    ("claude-3-opus", 4_096, 4_096),
    ("claude-3-sonnet", 4_096, 4_096),
    ("claude-3-5", 8_192, 8_192),
    ("claude-opus-4-0", 16_384, 32_000),
    ("claude-opus-4-1", 16_384, 32_000),
    ("claude-opus-4-2025", 16_384, 32_000),
)
"""(model id prefix, `max_tokens` when `max_output_tokens` is not set, the most the family
writes), first match: Anthropic requires a `max_tokens`, and refuses one past the model's
most (a flat 8,192 was refused by every Claude 3 model)."""
_LATER_FAMILIES = (16_384, 64_000)
"""Claude 3.7, Sonnet 4 and 4.5, Haiku 4.5, Opus 4.5, and models not known here."""
_NO_THINKING = ("claude-3-haiku", "claude-3-opus", "claude-3-sonnet", "claude-3-5")
"""Families without extended thinking (it came with Claude 3.7)."""


def output_limits(model: str) -> tuple[int, int]:
    """`max_tokens` when the settings give none, and the most the model's family writes."""
    name = model.rsplit("/", 1)[-1]
    for prefix, default, most in _FAMILIES:
        if name.startswith(prefix):
            return default, most
    return _LATER_FAMILIES


THINKING_BUDGETS = {
    "minimal": 1_024,
    "low": 2_048,
    "medium": 8_192,
    "high": 16_384,
    "xhigh": 32_000,
}
"""`reasoning_effort` as an extended-thinking budget (`thinking.budget_tokens`); `none` turns
thinking off. `max_tokens` is raised past the budget when it would not leave room to answer."""

_CACHED = {"type": "ephemeral"}

_STOP_REASONS: dict[str, FinishReason] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_use": "tool-calls",
    "refusal": "content-filter",
    "pause_turn": "other",
}

_ERROR_STATUSES = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "overloaded_error": 529,
}
"""The `error.type` Anthropic sends, as the HTTP status it stands for (an error sent mid-stream
has no status of its own)."""

_clients: dict[asyncio.AbstractEventLoop, dict[tuple[str | None, str], anthropic.AsyncAnthropic]]
_clients = {}
"""Pooled per event loop, as the chat adapter's are (`_openai._client`): a client's connections
belong to the loop that opened them."""


def _client(base_url: str | None, api_key: str) -> anthropic.AsyncAnthropic:
    per_loop = _clients.setdefault(asyncio.get_running_loop(), {})
    client = per_loop.get((base_url, api_key))
    if client is None:
        # No retries of the SDK's own: Temporal owns them (and the turn's recovery budget).
        import anthropic

        client = anthropic.AsyncAnthropic(base_url=base_url, api_key=api_key, max_retries=0)
        per_loop[(base_url, api_key)] = client
    return client


async def close_anthropic_clients() -> None:
    """Close this event loop's pooled connections, for a clean worker shutdown."""
    for client in _clients.pop(asyncio.get_running_loop(), {}).values():
        await client.close()


def to_anthropic_messages(
    messages: Sequence[dict[str, Any]],
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Chat Completions messages as the Messages API's: (system blocks, messages)."""
    system: list[dict[str, Any]] = []
    out: list[dict[str, Any]] = []

    def add(role: str, blocks: list[dict[str, Any]]) -> None:
        if not blocks:
            return
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})

    for message in messages:
        role, content = message.get("role"), message.get("content")
        if role in ("system", "developer"):
            system.extend(_text_blocks(content))
        elif role == "user":
            add("user", _user_blocks(content))
        elif role == "assistant":
            # Signed thinking first, as it was answered (`thinking_blocks`, from the stored
            # reasoning parts' signatures): Anthropic checks it before a `tool_use`.
            blocks = [dict(b) for b in message.get("thinking_blocks") or []]
            blocks += _text_blocks(content)
            for call in message.get("tool_calls") or []:
                function = call.get("function") or {}
                blocks.append(
                    {
                        "type": "tool_use",
                        "id": call["id"],
                        "name": function.get("name", ""),
                        "input": _tool_input(function.get("arguments")),
                    }
                )
            add("assistant", blocks)
        elif role == "tool":
            text = content if isinstance(content, str) else json.dumps(content)
            add(
                "user",
                [{"type": "tool_result", "tool_use_id": message["tool_call_id"], "content": text}],
            )
    return system, out


def _text_blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    if isinstance(content, list):
        return [
            {"type": "text", "text": p["text"]}
            for p in content
            if isinstance(p, dict) and p.get("type") == "text" and p.get("text")
        ]
    return []


def _user_blocks(content: Any) -> list[dict[str, Any]]:
    if not isinstance(content, list):
        return _text_blocks(content)
    blocks: list[dict[str, Any]] = []
    for part in content:
        if not isinstance(part, dict):
            continue
        if part.get("type") == "text" and part.get("text"):
            blocks.append({"type": "text", "text": part["text"]})
        elif part.get("type") == "image_url":
            blocks.append(_image_block(str((part.get("image_url") or {}).get("url", ""))))
        elif part.get("type") == "file":
            data = str((part.get("file") or {}).get("file_data", ""))
            media, _, payload = data.removeprefix("data:").partition(";base64,")
            if media == "application/pdf" and payload:
                source = {"type": "base64", "media_type": media, "data": payload}
                blocks.append({"type": "document", "source": source})
    return blocks


def _image_block(url: str) -> dict[str, Any]:
    if url.startswith("data:") and ";base64," in url:
        media, _, data = url.removeprefix("data:").partition(";base64,")
        return {"type": "image", "source": {"type": "base64", "media_type": media, "data": data}}
    return {"type": "image", "source": {"type": "url", "url": url}}


def _tool_input(arguments: Any) -> dict[str, Any]:
    if isinstance(arguments, dict):
        return arguments
    try:
        parsed = json.loads(arguments or "{}")
    except (TypeError, ValueError):
        return {}
    return parsed if isinstance(parsed, dict) else {}


def mark_cache(system: list[dict[str, Any]], messages: list[dict[str, Any]]) -> None:
    """`cache_control` on the system prompt's last block and on the last block before the
    newest message: the prefix every later step and turn begins with (two of the four
    breakpoints Anthropic allows)."""
    if system:
        system[-1] = {**system[-1], "cache_control": _CACHED}
    if len(messages) >= 2:
        stable = messages[-2]["content"]
        if stable:
            stable[-1] = {**stable[-1], "cache_control": _CACHED}


def anthropic_settings(
    settings: ModelSettings, tools: Sequence[ToolSpec], model: str
) -> dict[str, Any]:
    """The request fields `settings` make, `provider_options` last. Raises a non-retryable
    `ModelError` for what the Messages API cannot honour (`seed`; a `tool_choice` that names no
    offered tool, or requires one where there are none)."""
    if settings.seed is not None:
        raise ModelError(
            f"seed is set for model {model}, but Anthropic's Messages API has no seed: "
            "unset it for this endpoint",
            retryable=False,
            kind="refused",
        )
    if settings.temperature is not None and settings.temperature > 1:
        raise ModelError(
            f"temperature {settings.temperature} for model {model} is above Anthropic's most, 1",
            retryable=False,
            kind="refused",
        )
    default, most = output_limits(model)
    fields: dict[str, Any] = {"max_tokens": settings.max_output_tokens or default}
    for name in ("temperature", "top_p"):
        value = getattr(settings, name)
        if value is not None:
            fields[name] = value
    if settings.stop is not None:
        fields["stop_sequences"] = (
            [settings.stop] if isinstance(settings.stop, str) else settings.stop
        )
    effort = settings.reasoning_effort
    if effort is not None and effort != "none":
        if model.rsplit("/", 1)[-1].startswith(_NO_THINKING):
            raise ModelError(
                f"reasoning_effort {effort!r} for model {model}, which has no extended thinking "
                "(it came with Claude 3.7): unset it for this model",
                retryable=False,
                kind="refused",
            )
        # Room to answer past the thinking budget, within what the model writes at most.
        limit = min(most, max(fields["max_tokens"], THINKING_BUDGETS[effort] + 1_024))
        budget = min(THINKING_BUDGETS[effort], limit - 1_024)
        fields["thinking"] = {"type": "enabled", "budget_tokens": budget}
        fields["max_tokens"] = limit
    choice: dict[str, Any] | None = None
    if settings.tool_choice is not None:
        chosen = chat_tool_choice(settings.tool_choice, tools, model)
        if isinstance(chosen, dict):
            choice = {"type": "tool", "name": chosen["function"]["name"]}
        elif chosen is not None:
            choice = {"type": {"required": "any"}.get(chosen, chosen)}
    if settings.parallel_tool_calls is False and tools:
        choice = {**(choice or {"type": "auto"}), "disable_parallel_tool_use": True}
    if choice is not None:
        fields["tool_choice"] = choice
    if "thinking" in fields:
        # What Anthropic refuses beside extended thinking, said before any request.
        if fields.get("temperature", 1) != 1:
            raise _with_thinking(model, "temperature", "it may only be 1 there")
        if choice is not None and choice["type"] in ("any", "tool"):
            raise _with_thinking(model, "tool_choice", "a forced tool call is refused there")
    if settings.provider_options:
        fields.update(settings.provider_options)
    return fields


def _with_thinking(model: str, setting: str, why: str) -> ModelError:
    return ModelError(
        f"{setting} is set for model {model} with reasoning_effort (extended thinking), and "
        f"{why}: unset one of them",
        retryable=False,
        kind="refused",
    )


class AnthropicModel:
    """A model behind Anthropic's Messages API (`api: anthropic` in `THINK_MODEL_ENDPOINTS`)."""

    supports_native_output = False
    """Structured output goes through a final-answer tool, which every Claude model follows."""

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        extra_headers: dict[str, str] | None = None,
        timeout: float | None = None,
        endpoint: str | None = None,
        api_key_env: str | None = None,
        prices: Prices | None = None,
        price_provider: str | None = None,
    ) -> None:
        self.model = model
        self.base_url = base_url
        self.endpoint = endpoint
        self._api_key = api_key or PLACEHOLDER_API_KEY
        self._api_key_env = api_key_env
        self._extra_headers = dict(extra_headers or {})
        self._timeout = timeout
        self._prices = prices
        self._price_provider = price_provider

    @property
    def name(self) -> str:
        return f"{self.endpoint}/{self.model}" if self.endpoint else f"anthropic:{self.model}"

    def cost(self, usage: Usage) -> Decimal | None:
        """At the endpoint's prices, else Anthropic's published ones (None: unknown)."""
        if self._prices is not None:
            return listed_cost(self._prices, usage)
        return published_cost(usage, self.model, provider=self._price_provider or "anthropic")

    def __repr__(self) -> str:
        return f"AnthropicModel({self.model!r}, base_url={self.base_url!r})"

    def _where(self) -> str:
        where = self.base_url or "api.anthropic.com"
        return f"endpoint {self.endpoint!r} ({where})" if self.endpoint else where

    def _status_error(self, status: int, said: str, retry_after: str | None) -> ModelError:
        where = self._where()
        if status in (401, 403):
            key = whose_key(self._api_key, self._api_key_env)
            message = f"{where} refused the API key for model {self.model} ({key}): {said}"
        elif status == 404:
            message = f"{where} does not know model {self.model}: {said}"
        elif status == 429:
            hint = f"; retry after {retry_after} s" if retry_after else ""
            message = f"model {self.model} at {where} is rate limited: {said}{hint}"
        elif status == 529:
            message = f"model {self.model} at {where} is overloaded: {said}"
        else:
            message = f"model {self.model} failed with HTTP {status}: {said}"
        return ModelError(
            f"{message} (HTTP {status})", retryable=retryable_status(status), status=status
        )

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        await sdk_ready("anthropic")
        system, messages = to_anthropic_messages(request.messages)
        mark_cache(system, messages)
        body: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "stream": True,
            **anthropic_settings(request.settings, request.tools, self.model),
        }
        if system:
            body["system"] = system
        if request.tools:
            body["tools"] = [
                {"name": t.name, "description": t.description, "input_schema": t.parameters}
                for t in request.tools
            ]
        import anthropic
        from anthropic.types import Message

        state = AnthropicStreamState()
        client = _client(self.base_url, self._api_key)
        options: dict[str, Any] = {
            "headers": {**self._extra_headers, **metadata_headers(request.metadata)}
        }
        if self._timeout is not None:
            options["timeout"] = self._timeout
        try:
            # Events as the JSON objects they are, as the chat adapter reads its chunks.
            stream = await client.post(
                "/v1/messages",
                body=body,
                cast_to=Message,
                stream=True,
                stream_cls=anthropic.AsyncStream[object],
                options=cast("RequestOptions", options),
            )
            async with stream:
                async for event in stream:
                    for found in state.feed(event):
                        yield found
        except anthropic.APIStatusError as exc:
            raise self._from_status_error(exc) from exc
        except anthropic.APIConnectionError as exc:  # APITimeoutError included
            kind, why = connection_failure(
                exc, timed_out=isinstance(exc, anthropic.APITimeoutError)
            )
            raise ModelError(
                f"model {self.model} at {self.base_url or 'api.anthropic.com'} unreachable: {why}",
                retryable=True,
                kind=kind,
            ) from exc
        if not state.stopped:
            raise ModelError(
                f"model {self.model} stream ended before the model finished",
                retryable=True,
                kind="stream",
            )
        yield Finish(finish_reason=state.finish_reason, usage=state.usage())

    def _from_status_error(self, exc: anthropic.APIStatusError) -> ModelError:
        error = exc.body.get("error") if isinstance(exc.body, dict) else None
        kind = error.get("type") if isinstance(error, dict) else None
        said = str(error.get("message")) if isinstance(error, dict) else exc.message
        if exc.status_code == 200:
            # An `error` event in the middle of the stream: its type stands for a status.
            status = _ERROR_STATUSES.get(str(kind))
            if status is None:
                return ModelError(
                    f"model {self.model} failed mid-stream: {said}", retryable=True, kind="stream"
                )
            return self._status_error(status, f"{said} ({kind}, mid-stream)", None)
        retry_after = exc.response.headers.get("retry-after")
        return self._status_error(
            exc.status_code, f"{said} ({kind})" if kind else said, retry_after
        )


class AnthropicStreamState:
    """A Messages API stream read event by event into the turn's events."""

    def __init__(self) -> None:
        self._tools: dict[int, str] = {}
        self._input = 0
        self._cache_read = 0
        self._cache_write = 0
        self._output = 0
        self.finish_reason: FinishReason = "stop"
        self.stopped = False

    def usage(self) -> Usage:
        return Usage(
            input_tokens=self._input + self._cache_read + self._cache_write,
            output_tokens=self._output,
            cached_input_tokens=self._cache_read,
            cache_write_tokens=self._cache_write,
        )

    def _count(self, usage: Any) -> None:
        if not isinstance(usage, dict):
            return
        self._input = int(usage.get("input_tokens") or self._input)
        self._cache_read = int(usage.get("cache_read_input_tokens") or self._cache_read)
        self._cache_write = int(usage.get("cache_creation_input_tokens") or self._cache_write)
        self._output = int(usage.get("output_tokens") or self._output)

    def feed(self, event: object) -> list[ModelEvent]:
        if not isinstance(event, dict):
            return []
        kind = event.get("type")
        if kind == "content_block_delta":
            delta = event.get("delta") or {}
            dtype = delta.get("type")
            if dtype == "text_delta" and delta.get("text"):
                return [TextDelta(delta=delta["text"])]
            if dtype == "thinking_delta" and delta.get("thinking"):
                return [ReasoningDelta(delta=delta["thinking"])]
            if dtype == "signature_delta" and delta.get("signature"):
                signed = {"anthropic": {"signature": str(delta["signature"])}}
                return [ReasoningDelta(delta="", provider_metadata=signed)]
            if dtype == "input_json_delta" and delta.get("partial_json"):
                call = self._tools.get(int(event.get("index", -1)))
                if call is not None:
                    return [ToolCallDelta(tool_call_id=call, delta=delta["partial_json"])]
            return []
        if kind == "content_block_start":
            block = event.get("content_block") or {}
            if block.get("type") == "tool_use":
                self._tools[int(event.get("index", -1))] = str(block["id"])
                return [ToolCallStart(tool_call_id=str(block["id"]), tool_name=str(block["name"]))]
            if block.get("type") == "text" and block.get("text"):
                return [TextDelta(delta=block["text"])]
            if block.get("type") == "redacted_thinking" and block.get("data"):
                hidden = {"anthropic": {"redactedData": str(block["data"])}}
                return [ReasoningDelta(delta="", provider_metadata=hidden)]
            return []
        if kind == "message_start":
            self._count((event.get("message") or {}).get("usage"))
        elif kind == "message_delta":
            reason = (event.get("delta") or {}).get("stop_reason")
            if reason:
                self.finish_reason = _STOP_REASONS.get(str(reason), "other")
            self._count(event.get("usage"))
        elif kind == "message_stop":
            self.stopped = True
        return []
