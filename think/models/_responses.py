"""A model behind OpenAI's Responses API (`POST /v1/responses`), on the official `openai` SDK.

Why a second OpenAI adapter: OpenAI's reasoning models keep their reasoning from one call to the
next only here. Each answer's reasoning comes as a reasoning item (its summary streamed as text,
its content encrypted when the provider keeps nothing, `store: false`); handed back before the
calls it led to, the model goes on thinking where it stopped instead of starting over, which
Chat Completions cannot do. The item's id and encrypted content ride on the stored reasoning
part as `providerMetadata.openai` (`itemId`, `reasoningEncryptedContent`: the AI SDK's names),
and come back through the transcript's `reasoning_items`.

The turn hands the transcript in Chat Completions' shape; here it becomes input items: messages,
`function_call` and `function_call_output` items, reasoning items before what they led to.
Settings go out in this API's terms (`max_output_tokens`, `reasoning.effort`, a named
`tool_choice` as `{"type": "function", "name": ...}`); it has no `seed` and no stop sequences,
and says so before any request. Structured output is `text.format`.

Background mode (an endpoint option): the provider runs the response on its own and keeps it, so
the stream is only a view of it. A dropped connection re-attaches at once from the last event
read (`GET /v1/responses/{id}?stream=true&starting_after=N`); a worker that dies mid-answer
leaves a `Checkpoint` (the response's id, recorded by the step when the response is created),
and the attempt that replaces it streams the same response again instead of asking anew: the
tokens are paid once. A cancelled turn cancels its response (`cancel`).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Mapping, Sequence
from decimal import Decimal
from typing import TYPE_CHECKING, Any, cast

from think.exceptions import ModelError
from think.models._base import (
    Checkpoint,
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
from think.models._call_settings import ModelSettings
from think.models._chat_settings import tool_choice as chat_tool_choice
from think.models._openai import (
    OpenAIModel,
    _client,
    metadata_headers,
    retryable_status,
)
from think.models._prices import listed_cost, published_cost
from think.models._warm import sdk_ready

if TYPE_CHECKING:
    from openai._types import RequestOptions

log = logging.getLogger("think.models")

REATTACHES = 3
"""Times in a row a background response's stream is picked up again after its connection
dropped, with no event read in between, before the step fails as any dropped stream does."""

_REASONING_PREFIXES = ("o1", "o3", "o4", "gpt-5", "codex")

_INCOMPLETE: dict[str, FinishReason] = {
    "max_output_tokens": "length",
    "content_filter": "content-filter",
}

_FAILURE_STATUSES = {
    "rate_limit_exceeded": 429,
    "server_error": 500,
    "server_is_overloaded": 503,
    "slow_down": 503,
    "invalid_prompt": 400,
    "context_length_exceeded": 400,
    "invalid_request_error": 400,
    "vector_store_timeout": 504,
}
"""A failed response's `error.code` (or a stream's `error` event's), as the HTTP status it
stands for: a failure sent mid-stream has none of its own. A code of digits is that status
(llama.cpp's server sends its HTTP status as the code); unknown codes are retried."""


def is_reasoning_model(model: str) -> bool:
    """Whether `model` is one of OpenAI's reasoning models (o-series, GPT-5, Codex), whose
    reasoning can be handed back encrypted; asking any other model for it is refused."""
    name = model.lower().rsplit("/", 1)[-1]
    return name.startswith(_REASONING_PREFIXES) and not name.startswith("gpt-5-chat")


def to_responses_input(
    messages: Sequence[Mapping[str, Any]], *, stored: bool
) -> list[dict[str, Any]]:
    """Chat Completions messages as the Responses API's input items. An assistant message's
    `reasoning_items` go first, before what the reasoning led to; without `stored` (the
    provider kept nothing) only those with their encrypted content can be handed back."""
    items: list[dict[str, Any]] = []
    for message in messages:
        role, content = message.get("role"), message.get("content")
        if role in ("system", "developer"):
            text = _text(content)
            if text:
                items.append({"role": role, "content": text})
        elif role == "user":
            items.append({"role": "user", "content": _user_content(content)})
        elif role == "assistant":
            for item in message.get("reasoning_items") or []:
                if stored or item.get("encrypted_content"):
                    items.append(dict(item))
            text = _text(content)
            if text:
                items.append({"role": "assistant", "content": text})
            for call in message.get("tool_calls") or []:
                function = call.get("function") or {}
                arguments = function.get("arguments")
                items.append(
                    {
                        "type": "function_call",
                        "call_id": call["id"],
                        "name": function.get("name", ""),
                        "arguments": arguments if isinstance(arguments, str) else "{}",
                    }
                )
        elif role == "tool":
            output = content if isinstance(content, str) else _text(content)
            items.append(
                {
                    "type": "function_call_output",
                    "call_id": message["tool_call_id"],
                    "output": output,
                }
            )
    return items


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(p["text"]) for p in content if isinstance(p, dict) and p.get("type") == "text"
        )
    return ""


def _user_content(content: Any) -> str | list[dict[str, Any]]:
    if not isinstance(content, list):
        return _text(content)
    parts: list[dict[str, Any]] = []
    for part in content:
        if not isinstance(part, dict):
            continue
        kind = part.get("type")
        if kind == "text":
            parts.append({"type": "input_text", "text": str(part.get("text", ""))})
        elif kind == "image_url":
            url = str((part.get("image_url") or {}).get("url", ""))
            parts.append({"type": "input_image", "image_url": url, "detail": "auto"})
        elif kind == "file":
            file = part.get("file") or {}
            parts.append(
                {
                    "type": "input_file",
                    "filename": str(file.get("filename") or "file"),
                    "file_data": str(file.get("file_data", "")),
                }
            )
    return parts


def _refused(model: str, setting: str, why: str) -> ModelError:
    return ModelError(
        f"{setting} is set for model {model}, but {why}: unset it for this endpoint",
        retryable=False,
        kind="refused",
    )


def responses_settings(
    settings: ModelSettings, tools: Sequence[ToolSpec], model: str
) -> dict[str, Any]:
    """The request fields `settings` make, `provider_options` last. Raises a non-retryable
    `ModelError` for what the Responses API cannot honour (`seed`, `stop`; a `tool_choice`
    naming no offered tool, or requiring one where there are none)."""
    if settings.seed is not None:
        raise _refused(model, "seed", "the Responses API has no seed")
    if settings.stop is not None:
        raise _refused(model, "stop", "the Responses API has no stop sequences")
    fields: dict[str, Any] = {}
    for name in ("temperature", "top_p", "max_output_tokens"):
        value = getattr(settings, name)
        if value is not None:
            fields[name] = value
    if settings.tool_choice is not None:
        chosen = chat_tool_choice(settings.tool_choice, tools, model)
        if isinstance(chosen, dict):
            fields["tool_choice"] = {"type": "function", "name": chosen["function"]["name"]}
        elif chosen is not None:
            fields["tool_choice"] = chosen
    if settings.parallel_tool_calls is not None and tools:
        fields["parallel_tool_calls"] = settings.parallel_tool_calls
    effort = settings.reasoning_effort
    if effort == "none":
        fields["reasoning"] = {"effort": "none"}
    elif effort is not None:
        fields["reasoning"] = {"effort": effort, "summary": "auto"}
    elif is_reasoning_model(model):
        fields["reasoning"] = {"summary": "auto"}  # its reasoning, in words a person can read
    if settings.provider_options:
        fields.update(settings.provider_options)
    return fields


def _tool(tool: ToolSpec) -> dict[str, Any]:
    # `strict` is on by default here, unlike in Chat Completions, and refuses any schema that
    # is not closed and fully required: tools are sent as Chat Completions sends them.
    return {
        "type": "function",
        "name": tool.name,
        "description": tool.description,
        "parameters": tool.parameters,
        "strict": False,
    }


def _text_format(spec: OutputSpec) -> dict[str, Any]:
    return {
        "format": {
            "type": "json_schema",
            "name": spec.name,
            "schema": spec.json_schema,
            "strict": spec.strict,
        }
    }


class ResponsesModel(OpenAIModel):
    """A model behind OpenAI's Responses API (`api: responses` in `THINK_MODEL_ENDPOINTS`).

    `store`: let the provider keep each response (off: reasoning is handed back encrypted);
    `background`: run each response in background mode (needs `store`), so that a dropped
    stream or a dead worker picks the same response up again."""

    def __init__(
        self, model: str, *, store: bool = False, background: bool = False, **options: Any
    ) -> None:
        super().__init__(model, **options)
        self.store = store or background
        self.background = background

    def cost(self, usage: Usage) -> Decimal | None:
        """At the endpoint's prices, else OpenAI's published ones: the Responses API is
        OpenAI's own (Azure OpenAI's prices are OpenAI's), whatever proxy it is reached by."""
        if self._prices is not None:
            return listed_cost(self._prices, usage)
        return published_cost(usage, self.model, provider=self._price_provider or "openai")

    def __repr__(self) -> str:
        endpoint = f", endpoint={self.endpoint!r}" if self.endpoint else ""
        return f"ResponsesModel({self.model!r}, base_url={self.base_url!r}{endpoint})"

    def body(self, request: ModelRequest) -> dict[str, Any]:
        """The request's JSON body."""
        body: dict[str, Any] = {
            "model": self.model,
            "input": to_responses_input(request.messages, stored=self.store),
            "stream": True,
            "store": self.store,
            **self._extra_body,
            **responses_settings(request.settings, request.tools, self.model),
        }
        if request.tools:
            body["tools"] = [_tool(t) for t in request.tools]
        if request.output is not None and self._native_output:
            body["text"] = _text_format(request.output)
        if not self.store and is_reasoning_model(self.model):
            body.setdefault("include", ["reasoning.encrypted_content"])
        if self.background:
            body["background"] = True
        return body

    def _options(self, request: ModelRequest) -> dict[str, Any]:
        headers = {**self._extra_headers, **metadata_headers(request.metadata)}
        return {
            "headers": headers,
            **({"timeout": self._timeout} if self._timeout is not None else {}),
        }

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        state = ResponsesStreamState(self.name if self.background else None)
        resume = request.resume
        if resume is not None and resume.get("model") == self.name and resume.get("response_id"):
            state.response_id = str(resume["response_id"])
            state.sequence = int(resume.get("after") or 0)
        body = None if state.response_id else self.body(request)
        reattaches = 0
        while True:
            seen = state.sequence
            try:
                async for event in self._events(request, state, body):
                    yield event
                break
            except ModelError as exc:
                if body is None and exc.status == 404:
                    # The provider no longer has the response (expired, or never kept):
                    # ask anew.
                    log.info("model %s: response %s is gone, asking anew", self.name, resume)
                    state = ResponsesStreamState(self.name if self.background else None)
                    body = self.body(request)
                    continue
                if (
                    not self.background
                    or state.response_id is None
                    or exc.kind not in ("connection", "timeout", "stream")
                    or state.ended
                ):
                    raise
                reattaches = 0 if state.sequence != seen else reattaches + 1
                if reattaches >= REATTACHES:
                    raise
                log.info(
                    "model %s: the stream of response %s dropped (%s); picking it up after "
                    "event %d",
                    self.name,
                    state.response_id,
                    exc,
                    state.sequence,
                )
                body = None  # the response goes on at the provider: pick it up
        yield Finish(finish_reason=state.finish_reason, usage=state.usage)

    async def _events(
        self, request: ModelRequest, state: ResponsesStreamState, body: dict[str, Any] | None
    ) -> AsyncIterator[ModelEvent]:
        """One request's events: `body` posted, or (None) the response `state` names streamed
        again from after its last event read."""
        await sdk_ready("openai")
        import openai
        from openai.types.responses import Response

        client = _client(self.base_url, self._api_key)
        options = self._options(request)
        try:
            if body is not None:
                stream = await client.post(
                    "/responses",
                    body=body,
                    cast_to=Response,
                    stream=True,
                    stream_cls=openai.AsyncStream[object],
                    options=cast("RequestOptions", options),
                )
            else:
                params = {"stream": "true", "starting_after": state.sequence}
                stream = await client.get(
                    f"/responses/{state.response_id}",
                    cast_to=Response,
                    stream=True,
                    stream_cls=openai.AsyncStream[object],
                    options=cast("RequestOptions", {**options, "params": params}),
                )
            async with stream:
                async for event in stream:
                    for found in state.feed(event):
                        yield found
                    if state.failure is not None:
                        raise self._failed(*state.failure)
        except (openai.APIStatusError, openai.APIConnectionError) as exc:  # timeouts included
            raise self._transport_error(exc) from exc
        except openai.APIError as exc:
            # A frame of `{"error": ...}` with no event name (llama.cpp's server mid-stream):
            # the SDK raises it as it reads.
            body = exc.body if isinstance(exc.body, dict) else {}
            code = body.get("code") or body.get("type") or exc.code or ""
            raise self._failed(str(code), str(body.get("message") or exc.message)) from exc
        if not state.ended:
            # Closed without its last event (vLLM and Ollama end a stream that failed so):
            # in background mode the response may still be running, and is picked up.
            raise ModelError(
                f"model {self.model} stream ended before the model finished",
                retryable=True,
                kind="stream",
            )

    def _failed(self, code: str, message: str) -> ModelError:
        status = int(code) if code.isdigit() else _FAILURE_STATUSES.get(code)
        said = f"{message} ({code}, mid-stream)" if code else f"{message} (mid-stream)"
        if status is None:
            return ModelError(
                f"model {self.model} failed mid-stream: {said}", retryable=True, kind="stream"
            )
        return ModelError(
            f"model {self.model} failed with HTTP {status}: {said}",
            retryable=retryable_status(status),
            status=status,
        )

    async def cancel(self, resume: Mapping[str, Any]) -> None:
        """Stop the background response `resume` names (a cancelled turn's): it would go on
        generating, and billing, with nobody reading. Best effort: a failure is logged."""
        if resume.get("model") != self.name or not resume.get("response_id"):
            return
        await sdk_ready("openai")
        import openai
        from openai.types.responses import Response

        client = _client(self.base_url, self._api_key)
        try:
            await client.post(
                f"/responses/{resume['response_id']}/cancel",
                cast_to=Response,
                options={"headers": self._extra_headers, "timeout": 10},
            )
        except openai.APIError as exc:
            log.warning("model %s: could not cancel response %s: %s", self.name, resume, exc)


class ResponsesStreamState:
    """A Responses API stream read event by event into the turn's events. `checkpoints`: the
    model's name, when it runs in background mode (its response can be picked up again)."""

    def __init__(self, checkpoints: str | None = None) -> None:
        self._checkpoints = checkpoints
        self.response_id: str | None = None
        self.sequence = 0
        """The last event's `sequence_number`."""
        self.usage = Usage()
        self.finish_reason: FinishReason = "stop"
        self.ended = False
        self.failure: tuple[str, str] | None = None
        """A failed response's (or an `error` event's) code and message."""
        self._calls: dict[str, str] = {}  # item id -> call id
        self._argued: set[str] = set()  # item ids whose arguments arrived
        self._called = False

    def feed(self, event: object) -> list[ModelEvent]:
        if not isinstance(event, dict):
            return []
        sequence = event.get("sequence_number")
        if isinstance(sequence, int):
            self.sequence = sequence
        kind = event.get("type")
        if kind == "response.output_text.delta" or kind == "response.refusal.delta":
            delta = event.get("delta")
            return [TextDelta(delta=delta)] if isinstance(delta, str) and delta else []
        if kind in ("response.reasoning_summary_text.delta", "response.reasoning_text.delta"):
            delta = event.get("delta")
            return [ReasoningDelta(delta=delta)] if isinstance(delta, str) and delta else []
        if kind == "response.function_call_arguments.delta":
            item_id, delta = str(event.get("item_id")), event.get("delta")
            call = self._calls.get(item_id)
            if call is None or not isinstance(delta, str) or not delta:
                return []
            self._argued.add(item_id)
            return [ToolCallDelta(tool_call_id=call, delta=delta)]
        if kind == "response.output_item.added":
            return self._item_added(event.get("item"))
        if kind == "response.output_item.done":
            return self._item_done(event.get("item"))
        if kind == "response.reasoning_summary_part.added":
            # The summary's paragraphs are one reasoning part: apart, as they were written.
            index = event.get("summary_index")
            return [ReasoningDelta(delta="\n\n")] if isinstance(index, int) and index > 0 else []
        if kind in ("response.created", "response.queued", "response.in_progress"):
            return self._started(event.get("response"))
        if kind in ("response.completed", "response.incomplete"):
            self._ended(event.get("response"))
        elif kind == "response.failed":
            response = event.get("response") or {}
            error = response.get("error") if isinstance(response, dict) else None
            error = error if isinstance(error, dict) else {}
            self.failure = (str(error.get("code") or ""), str(error.get("message") or "failed"))
        elif kind == "error":
            self.failure = (str(event.get("code") or ""), str(event.get("message") or "error"))
        return []

    def _started(self, response: Any) -> list[ModelEvent]:
        if not isinstance(response, dict) or self.response_id is not None:
            return []
        self.response_id = str(response.get("id") or "") or None
        if self._checkpoints is None or self.response_id is None:
            return []
        resume = {"model": self._checkpoints, "response_id": self.response_id}
        return [Checkpoint(resume={**resume, "after": self.sequence})]

    def _item_added(self, item: Any) -> list[ModelEvent]:
        if not isinstance(item, dict) or item.get("type") != "function_call":
            return []
        item_id, call_id = str(item.get("id") or item.get("call_id")), str(item.get("call_id"))
        if item_id in self._calls:
            return []
        self._calls[item_id] = call_id
        self._called = True
        return [ToolCallStart(tool_call_id=call_id, tool_name=str(item.get("name") or ""))]

    def _item_done(self, item: Any) -> list[ModelEvent]:
        if not isinstance(item, dict):
            return []
        if item.get("type") == "reasoning" and item.get("id"):
            meta: dict[str, Any] = {"itemId": str(item["id"])}
            if item.get("encrypted_content"):
                meta["reasoningEncryptedContent"] = str(item["encrypted_content"])
            return [ReasoningDelta(delta="", provider_metadata={"openai": meta})]
        if item.get("type") != "function_call":
            return []
        # A server that sends a call's arguments only whole (in the item, or only here).
        found = self._item_added(item)
        item_id = str(item.get("id") or item.get("call_id"))
        arguments = item.get("arguments")
        if item_id not in self._argued and isinstance(arguments, str) and arguments:
            self._argued.add(item_id)
            found.append(ToolCallDelta(tool_call_id=self._calls[item_id], delta=arguments))
        return found

    def _ended(self, response: Any) -> None:
        self.ended = True
        if not isinstance(response, dict):
            return
        details = response.get("incomplete_details")
        reason = details.get("reason") if isinstance(details, dict) else None
        if response.get("status") == "incomplete":
            self.finish_reason = _INCOMPLETE.get(str(reason), "other")
        elif self._called:
            self.finish_reason = "tool-calls"
        usage = response.get("usage")
        if isinstance(usage, dict):
            self.usage = usage_from_responses(usage)


def usage_from_responses(usage: Mapping[str, Any]) -> Usage:
    """A Responses API `usage` object: input tokens with the cached and cache-written ones
    among them, output tokens with the reasoning ones among them."""

    def count(value: object) -> int:
        return value if isinstance(value, int) and value > 0 else 0

    given = usage.get("input_tokens_details")
    given = given if isinstance(given, dict) else {}
    made = usage.get("output_tokens_details")
    made = made if isinstance(made, dict) else {}
    return Usage(
        input_tokens=count(usage.get("input_tokens")),
        output_tokens=count(usage.get("output_tokens")),
        cached_input_tokens=count(given.get("cached_tokens")),
        cache_write_tokens=count(given.get("cache_write_tokens")),
        reasoning_tokens=count(made.get("reasoning_tokens")),
    )
