"""The adapter for every OpenAI-compatible Chat Completions server (OpenAI, vLLM, Ollama, ...).

Chat Completions rather than the Responses API, because it is the one protocol that local
servers and proxies all speak. The SDK is built with `max_retries=0`: Temporal owns retries, and
an SDK retrying underneath it would hide failures from the workflow history and multiply the
delay before Temporal's own backoff even starts.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import uuid
import weakref
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from think._settings import Prices
from think.exceptions import ModelError, ModelFailureKind
from think.models._base import (
    Finish,
    FinishReason,
    ModelEvent,
    ModelRequest,
    OutputSpec,
    ReasoningDelta,
    TextDelta,
    ToolCallDelta,
    ToolCallStart,
    ToolSpec,
    Usage,
)
from think.models._chat_body import chat_only, request_json
from think.models._chat_settings import chat_settings
from think.models._prices import listed_cost, published_cost
from think.models._think_tags import ThinkTags, ThinkTagSplitter
from think.models._warm import sdk_ready

if TYPE_CHECKING:
    # Imported where a request is made or its failure read, not here: `openai` (its types
    # package imports every API's types) took 1.1 s to import, which every process that
    # imports `think.models` paid, the gateway included.
    import openai
    from openai.types.chat import ChatCompletionToolParam

DEFAULT_BASE_URL = "https://api.openai.com/v1"
PLACEHOLDER_API_KEY = "not-needed"
"""Sent when no key is configured: local servers ignore it, and the SDK refuses to start without."""
METADATA_HEADER_PREFIX = "x-think-"

_FINISH_REASONS: dict[str, FinishReason] = {
    "stop": "stop",
    "length": "length",
    "tool_calls": "tool-calls",
    "function_call": "tool-calls",
    "content_filter": "content-filter",
}

# One SDK client per event loop and endpoint: its connection pool is what makes the second model
# call of a turn skip the TCP/TLS handshake, and a pool cannot be shared across event loops.
_clients: weakref.WeakKeyDictionary[
    asyncio.AbstractEventLoop, dict[tuple[str, str], openai.AsyncOpenAI]
] = weakref.WeakKeyDictionary()


def finish_reason_from_openai(reason: str | None) -> FinishReason:
    return _FINISH_REASONS.get(reason or "", "other")


def whose_key(api_key: str, api_key_env: str | None) -> str:
    """Where a refused key came from, in words (never the key itself)."""
    if api_key == PLACEHOLDER_API_KEY:
        return "no API key is set" + (f" ({api_key_env})" if api_key_env else "")
    if api_key_env:
        return f"the key is read from {api_key_env}"
    return "the key is the endpoint's own api_key"


def retryable_status(status: int) -> bool:
    """Timeouts, conflicts, rate limits and server faults pass; other 4xx will fail the same way."""
    return status in (408, 409, 429) or status >= 500


def status_error(model: str, status: int, message: str) -> ModelError:
    return ModelError(
        f"model {model} failed with HTTP {status}: {message}",
        retryable=retryable_status(status),
        status=status,
    )


def connection_failure(
    exc: BaseException, *, timed_out: bool | None = None
) -> tuple[ModelFailureKind, str]:
    """What stopped the request from reaching the server, from the cause under the SDK's own
    words: the HTTP transport reports a refused connection, a failed DNS lookup and a failed
    TLS handshake all as a connect *timeout* ("Request timed out."), which sends whoever reads
    it after the wrong problem. The innermost cause says it best (the transport's own errors
    subclass the OS's and the `ssl` module's, without their fields)."""
    chain: list[BaseException] = []
    cause: BaseException | None = exc
    while cause is not None and cause not in chain:
        chain.append(cause)
        cause = cause.__cause__ or cause.__context__
    for cause in reversed(chain):
        if isinstance(cause, ConnectionRefusedError):
            return "connection", (
                "connection refused: nothing listens there (is the server up, the port right?)"
            )
        if isinstance(cause, socket.gaierror):
            return "dns", f"DNS lookup failed ({cause.strerror or cause}): is the host name right?"
        if isinstance(cause, ssl.SSLCertVerificationError):
            why = getattr(cause, "verify_message", None) or getattr(cause, "reason", None)
            return "tls", f"TLS certificate not trusted ({why or cause})"
        if isinstance(cause, ssl.SSLError):
            reason = getattr(cause, "reason", None) or str(cause)
            return "tls", (
                f"TLS handshake failed ({reason}): an http:// server behind an https:// URL?"
            )
        if isinstance(cause, ConnectionResetError):
            return "connection", "the server reset the connection"
    if timed_out is None:
        import openai

        timed_out = isinstance(exc, openai.APITimeoutError)
    if timed_out:
        return "timeout", "timed out"
    return "connection", str(getattr(exc, "message", None) or exc)


def usage_from_openai(usage: Mapping[str, Any]) -> Usage:
    """A Chat Completions `usage` object as each server fills it: OpenAI's (and Azure's,
    vLLM's, OpenRouter's) `*_tokens_details`, DeepSeek's `prompt_cache_hit_tokens`,
    OpenRouter's and LiteLLM's `cache_write_tokens`; Ollama and llama.cpp send the counts
    alone."""

    def count(value: object) -> int:
        return value if isinstance(value, int) and value > 0 else 0

    prompt = usage.get("prompt_tokens_details")
    prompt = prompt if isinstance(prompt, dict) else {}
    completion = usage.get("completion_tokens_details")
    completion = completion if isinstance(completion, dict) else {}
    return Usage(
        input_tokens=count(usage.get("prompt_tokens")),
        output_tokens=count(usage.get("completion_tokens")),
        cached_input_tokens=count(prompt.get("cached_tokens"))
        or count(usage.get("prompt_cache_hit_tokens")),
        cache_write_tokens=count(prompt.get("cache_write_tokens")),
        reasoning_tokens=count(completion.get("reasoning_tokens")),
    )


def metadata_headers(metadata: Mapping[str, str]) -> dict[str, str]:
    """`{"conversation_id": "c1"}` -> `{"x-think-conversation-id": "c1"}`, for proxies and fakes."""
    return {
        METADATA_HEADER_PREFIX + key.lower().replace("_", "-"): value
        for key, value in metadata.items()
    }


def tool_param(tool: ToolSpec) -> ChatCompletionToolParam:
    return {
        "type": "function",
        "function": {
            "name": tool.name,
            "description": tool.description,
            "parameters": tool.parameters,
        },
    }


def response_format(spec: OutputSpec) -> dict[str, Any]:
    """Structured output as Chat Completions' `response_format`."""
    return {
        "type": "json_schema",
        "json_schema": {"name": spec.name, "schema": spec.json_schema, "strict": spec.strict},
    }


def reasoning_text(delta: Mapping[str, Any]) -> str:
    """The reasoning a chunk carries, in whichever field the server puts it.

    DeepSeek, llama.cpp and older vLLM say `reasoning_content`; newer vLLM, Ollama and OpenRouter
    say `reasoning`. OpenRouter also sends `reasoning_details`, blocks of type
    `reasoning.text` or `reasoning.summary` (how OpenAI's reasoning summaries reach Chat
    Completions) beside opaque `reasoning.encrypted` ones; it repeats their text in `reasoning`,
    so the blocks are read only when no string field is there. OpenAI's own Chat Completions
    sends no reasoning at all: its summaries exist only in the Responses API.
    """
    for name in ("reasoning_content", "reasoning"):
        value = delta.get(name)
        if isinstance(value, str) and value:
            return value
    details = delta.get("reasoning_details")
    if not isinstance(details, list):
        return ""
    parts: list[str] = []
    for block in details:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        value = block.get("text") if kind == "reasoning.text" else None
        value = block.get("summary") if kind == "reasoning.summary" else value
        if isinstance(value, str):
            parts.append(value)
    return "".join(parts)


def content_events(content: object) -> list[TextDelta | ReasoningDelta]:
    """What a delta's `content` says: a string is text; a list is parts, as Mistral's
    reasoning models stream them (`[{"type": "text", "text": ...}]`, and
    `{"type": "thinking", "thinking": [{"type": "text", "text": ...}]}` for reasoning).
    Text parts are text, thinking parts reasoning, in the order sent; a part of another type
    (a reference, an image) or of an unexpected shape says nothing the turn can show, and is
    skipped rather than failing the step: a step that raised on it would raise again on every
    retry."""
    if isinstance(content, str):
        return [TextDelta(delta=content)] if content else []
    if not isinstance(content, list):
        return []
    events: list[TextDelta | ReasoningDelta] = []
    for part in content:
        if not isinstance(part, dict):
            continue
        kind = part.get("type")
        if kind == "text" and isinstance(part.get("text"), str) and part["text"]:
            events.append(TextDelta(delta=part["text"]))
        elif kind == "thinking":
            thought = _thinking_text(part.get("thinking"))
            if thought:
                events.append(ReasoningDelta(delta=thought))
    return events


def _thinking_text(thinking: object) -> str:
    """A thinking part's text: a string, or a list of text parts (Mistral's shape)."""
    if isinstance(thinking, str):
        return thinking
    if not isinstance(thinking, list):
        return ""
    return "".join(
        p["text"]
        for p in thinking
        if isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str)
    )


def _client(base_url: str, api_key: str) -> openai.AsyncOpenAI:
    per_loop = _clients.setdefault(asyncio.get_running_loop(), {})
    client = per_loop.get((base_url, api_key))
    if client is None:
        # On aiohttp's transport (the SDK's own `DefaultAioHttpClient`), whose HTTP parsing is
        # in C: a tool turn costs the worker less CPU than on httpx's default transport
        # (docs/benchmarks.md, "Figures behind code comments"). Timeouts, proxies from the
        # environment and the SDK's typed errors are as before.
        import openai

        client = openai.AsyncOpenAI(
            base_url=base_url,
            api_key=api_key,
            max_retries=0,
            http_client=openai.DefaultAioHttpClient(),
        )
        per_loop[(base_url, api_key)] = client
    return client


async def close_openai_clients() -> None:
    """Close the pooled connections of this event loop, for a clean worker shutdown."""
    for client in _clients.pop(asyncio.get_running_loop(), {}).values():
        await client.close()


class OpenAIModel:
    """A model behind an OpenAI-compatible `/chat/completions` endpoint, streamed.

    `model` is what is sent as the request's `model`, whatever `ModelRequest.model` says: the
    client *is* the model, and the request's field is only a label. `request.metadata` goes out
    as `x-think-<key>` headers so a gateway or `think.testing.FakeOpenAIServer` can tell which
    conversation and turn a call belongs to.

    `request.output` goes out as `response_format` (JSON Schema) unless `native_output` is off,
    for servers that reject it; `supports_native_output` says which, so the turn can ask for
    structured output through a final-answer tool instead. `endpoint` is the name of the
    configured endpoint this model lives on (`THINK_MODEL_ENDPOINTS`), None for the default one:
    `name` is then `<endpoint>/<model>` rather than `openai:<model>`. `think_tags` says whether
    a leading `<think>…</think>` in the answer is reasoning (`think.models._think_tags`);
    `api_key_env` names the variable the key came from, for an error that must say which.
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        extra_headers: Mapping[str, str] | None = None,
        extra_body: Mapping[str, Any] | None = None,
        timeout: float | None = None,
        native_output: bool = True,
        endpoint: str | None = None,
        think_tags: ThinkTags = "leading",
        api_key_env: str | None = None,
        prices: Prices | None = None,
        price_provider: str | None = None,
    ) -> None:
        self.model = model
        self.endpoint = endpoint
        self.base_url = base_url or DEFAULT_BASE_URL
        self._api_key = api_key or PLACEHOLDER_API_KEY
        self._extra_headers = dict(extra_headers or {})
        self._extra_body = dict(extra_body or {})
        self._timeout = timeout
        self._native_output = native_output
        self._think_tags: ThinkTags = think_tags
        self._api_key_env = api_key_env
        self._prices = prices
        self._price_provider = price_provider

    @property
    def name(self) -> str:
        return f"{self.endpoint}/{self.model}" if self.endpoint else f"openai:{self.model}"

    @property
    def supports_native_output(self) -> bool:
        return self._native_output

    def cost(self, usage: Usage) -> Decimal | None:
        """The step's cost: at the endpoint's prices, else the published ones (None: unknown)."""
        if self._prices is not None:
            return listed_cost(self._prices, usage)
        return published_cost(
            usage, self.model, base_url=self.base_url, provider=self._price_provider
        )

    def __repr__(self) -> str:
        endpoint = f", endpoint={self.endpoint!r}" if self.endpoint else ""
        return f"OpenAIModel({self.model!r}, base_url={self.base_url!r}{endpoint})"

    def _transport_error(
        self, exc: openai.APIStatusError | openai.APIConnectionError
    ) -> ModelError:
        """An HTTP error answer (`_status_error`) or a connection that failed (refused, reset,
        DNS, TLS, a timeout: `connection_failure` tells which), as the turn's `ModelError`."""
        import openai

        if isinstance(exc, openai.APIStatusError):
            return self._status_error(exc)
        kind, why = connection_failure(exc)
        return ModelError(
            f"model {self.model} at {self.base_url} unreachable: {why}", retryable=True, kind=kind
        )

    def _status_error(self, exc: openai.APIStatusError) -> ModelError:
        """An HTTP error answer, in words that say where to look: a refused key names the
        endpoint and the variable the key is read from (never the key), an unknown model the
        server that does not know it, a rate limit its retry hint."""
        status, said = exc.status_code, _provider_message(exc)
        where = f"endpoint {self.endpoint!r} ({self.base_url})" if self.endpoint else self.base_url
        if status in (401, 403):
            key = whose_key(self._api_key, self._api_key_env)
            message = f"{where} refused the API key for model {self.model} ({key}): {said}"
        elif status == 404:
            message = (
                f"{where} does not know model {self.model}, or the base URL's path is wrong "
                f"(it usually ends in /v1): {said}"
            )
        elif status == 429:
            message = f"model {self.model} at {where} is rate limited: {said}{_retry_after(exc)}"
        else:
            return status_error(self.model, status, said)
        return ModelError(
            f"{message} (HTTP {status})", retryable=retryable_status(status), status=status
        )

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        await sdk_ready("openai")
        import openai
        from openai.types.chat import ChatCompletion

        client = _client(self.base_url, self._api_key)
        state = OpenAIStreamState(self._think_tags)
        messages, encoded = chat_only(request.messages, request.encoded)
        try:
            body: dict[str, Any] = {
                "model": self.model,
                "messages": messages,
                "stream": True,
                "stream_options": {"include_usage": True},
                **({"tools": [tool_param(t) for t in request.tools]} if request.tools else {}),
                **(
                    {"response_format": response_format(request.output)}
                    if request.output is not None and self._native_output
                    else {}
                ),
                **self._extra_body,
                **chat_settings(
                    request.settings, request.tools, model=self.model, base_url=self.base_url
                ),
            }
            # The SDK's typed `create()` walks every message through its TypedDict transformer,
            # at a cost that grows with every turn (docs/benchmarks.md, "Figures behind code
            # comments").
            # The messages are already plain Chat Completions JSON, so post them as they are;
            # responses, streaming and typed errors go through the SDK exactly as before.
            # Encoded with orjson, not the SDK's json.dumps, and the history not at all when
            # the worker kept it encoded (`request.encoded`): a long transcript is most of the
            # request, and this runs for every step.
            stream = await client.post(
                "/chat/completions",
                content=request_json(body, encoded),
                cast_to=ChatCompletion,
                stream=True,
                # Chunks as the JSON objects they are: building a pydantic model of each (the
                # SDK's `construct`, field by field) was most of the SDK's cost per token.
                stream_cls=openai.AsyncStream[object],
                options={
                    "headers": {
                        "Content-Type": "application/json",
                        **self._extra_headers,
                        **metadata_headers(request.metadata),
                    },
                    **({"timeout": self._timeout} if self._timeout is not None else {}),
                },
            )
            async with stream:
                async for chunk in stream:
                    for event in state.feed(chunk):
                        yield event
        except (openai.APIStatusError, openai.APIConnectionError) as exc:  # timeouts included
            raise self._transport_error(exc) from exc
        except openai.APIError as exc:
            # An `{"error": ...}` event in the middle of the stream: no HTTP status to go on, so
            # trust a status-like `code` when the server sends one, and retry otherwise.
            code = exc.code or ""
            if code.isdigit():
                raise status_error(self.model, int(code), _provider_message(exc)) from exc
            raise ModelError(
                f"model {self.model} failed mid-stream: {_provider_message(exc)}",
                retryable=True,
                kind="stream",
            ) from exc
        for event in state.flush():
            yield event
        if state.finish_reason is None:
            raise ModelError(
                f"model {self.model} stream ended before the model finished",
                retryable=True,
                kind="stream",
            )
        yield Finish(
            finish_reason=finish_reason_from_openai(state.finish_reason), usage=state.usage
        )


def _retry_after(exc: openai.APIStatusError) -> str:
    """The server's retry hint (`Retry-After`, in seconds or as a date), as words to add."""
    value = exc.response.headers.get("retry-after")
    if not value:
        return ""
    return f"; retry after {value} s" if value.strip().isdigit() else f"; retry after {value}"


def _provider_message(exc: openai.APIError) -> str:
    """The provider's own words (`error.message`), not the SDK's `Error code: 400 - {...}` dump."""
    body = exc.body
    message = body.get("message") if isinstance(body, dict) else None
    if isinstance(message, str) and message:
        parts = (exc.type, exc.code)
        detail = [p for p in parts if p and p != message and not p.isdigit()]
        return message + (f" ({', '.join(detail)})" if detail else "")
    if isinstance(body, str) and body.strip():
        return body.strip()[:500]
    return exc.message


@dataclass
class _ToolCall:
    id: str
    name: str | None = None
    started: bool = False
    pending: list[str] = field(default_factory=list)


NO_INDEX = -1
"""The slot of the calls of a server that sends no `index`."""


class OpenAIStreamState:
    """Turns chunks into events. A tool call's fragments are matched by `index` (only the
    first fragment carries the id), and a fragment with a new id and a name at an index in use
    is a new call: some servers send parallel calls whole, one a chunk, all at `index` 0
    (current Ollama with some models, some vLLM and SGLang builds). `think_tags`: whether a
    leading `<think>…</think>` block in the text is reasoning (`think.models._think_tags`)."""

    def __init__(self, think_tags: ThinkTags = "leading") -> None:
        self.calls: list[_ToolCall] = []
        self._at_index: dict[int, _ToolCall] = {}
        self._text = ThinkTagSplitter(think_tags)
        self.finish_reason: str | None = None
        self.usage = Usage()

    def feed(self, chunk: object) -> list[ModelEvent]:
        """One `chat.completion.chunk`, as its JSON object (what else a server sends is
        ignored)."""
        if not isinstance(chunk, dict):
            return []
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            self.usage = usage_from_openai(usage)
        choices = chunk.get("choices")
        if not choices:
            return []
        if len(choices) == 1 and type(choices[0]) is dict and not choices[0].get("index"):
            return self._choice(choices[0])
        events: list[ModelEvent] = []
        for choice in choices:
            if isinstance(choice, dict) and choice.get("index", 0) == 0:
                events.extend(self._choice(choice))
        return events

    def _choice(self, choice: dict[str, Any]) -> list[ModelEvent]:
        if isinstance(choice.get("finish_reason"), str):
            self.finish_reason = choice["finish_reason"]
        delta = choice.get("delta")
        return self._delta(delta) if isinstance(delta, dict) else []

    def _delta(self, delta: Mapping[str, Any]) -> list[ModelEvent]:
        content = delta.get("content")
        if type(content) is str and (len(delta) == 1 or (len(delta) == 2 and "role" in delta)):
            # Most of an answer's chunks: its words alone, read without the search below for
            # reasoning, refusals and calls (9 µs a chunk before, a 200-chunk answer's 2 ms).
            return self._text.feed(content)  # type: ignore[return-value]
        events: list[ModelEvent] = []
        reasoning = reasoning_text(delta)
        if reasoning:
            events.append(ReasoningDelta(delta=reasoning))
        content = delta.get("content")
        if isinstance(content, str):
            events.extend(self._text.feed(content))
        else:
            events.extend(content_events(content))
        refusal = delta.get("refusal")
        if isinstance(refusal, str) and refusal:
            events.append(TextDelta(delta=refusal))
        for tool_call in delta.get("tool_calls") or ():
            if isinstance(tool_call, dict):
                events.extend(self._tool_call(tool_call))
        return events

    def _tool_call(self, delta: Mapping[str, Any]) -> list[ModelEvent]:
        index = delta.get("index")
        if not isinstance(index, int):
            index = NO_INDEX
        call_id = delta.get("id") if isinstance(delta.get("id"), str) else None
        function = delta.get("function")
        function = function if isinstance(function, dict) else {}
        name, arguments = function.get("name"), function.get("arguments")
        named = isinstance(name, str) and bool(name)
        call = self._at_index.get(index)
        if call is None or (call_id and named and call.name is not None and call_id != call.id):
            call = _ToolCall(id=call_id or f"call_{uuid.uuid4().hex[:24]}")
            self.calls.append(call)
            self._at_index[index] = call
        elif call_id and not call.started:
            call.id = call_id  # the id came after a first fragment without one
        if named and call.name is None:
            call.name = name
        if isinstance(arguments, str) and arguments:
            call.pending.append(arguments)
        # Some servers send the name after the id; hold fragments until the call can be started.
        return self._drain(call) if call.name is not None else []

    def _drain(self, call: _ToolCall) -> list[ModelEvent]:
        events: list[ModelEvent] = []
        if not call.started:
            call.started = True
            events.append(ToolCallStart(tool_call_id=call.id, tool_name=call.name or ""))
        events.extend(ToolCallDelta(tool_call_id=call.id, delta=part) for part in call.pending)
        call.pending.clear()
        return events

    def flush(self) -> list[ModelEvent]:
        """The text held back at the end (what might have been a tag), and calls that never
        got a name started, so their arguments are not silently lost."""
        events: list[ModelEvent] = list(self._text.flush())
        for call in self.calls:
            if not call.started or call.pending:
                events.extend(self._drain(call))
        return events
