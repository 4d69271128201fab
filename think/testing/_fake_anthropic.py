"""A fake of Anthropic's Messages API (`POST /v1/messages`, streamed) on 127.0.0.1, played from
the same scripts as `FakeOpenAIServer` (`text`, `reasoning`, `tool_call`, `error`, `stall`,
`disconnect`, `reply(usage=...)`), so a test scripts a conversation once and points it at either
protocol.

It speaks the API's event stream as the real one does (`message_start`, `ping`,
`content_block_start`/`_delta`/`_stop` for text, `thinking` with its `signature_delta`, and
`tool_use` with `input_json_delta` fragments, `message_delta` with the stop reason and output
tokens, `message_stop`; an `error` event when a scripted error comes after the stream began),
and refuses what the real one refuses with its `invalid_request_error`: no `max_tokens`, roles
that do not alternate or do not begin with the user, an empty text block, a `tool_result` that
answers no `tool_use` of the message before it.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from think.models import METADATA_HEADER_PREFIX, Usage
from think.testing._fake_openai import FakeOpenAIServer, _ScriptedDisconnect, _sleep
from think.testing._replies import Heard, plan_of
from think.testing._script import (
    Chunk,
    DisconnectStep,
    ErrorStep,
    Plan,
    RawDelta,
    Sleep,
    ToolArgs,
    ToolStart,
)

CONVERSATION_HEADER = METADATA_HEADER_PREFIX + "conversation-id"

_STOP_REASONS = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "length": "max_tokens",
    "content_filter": "refusal",
}
_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    529: "overloaded_error",
}


def _error_type(status: int) -> str:
    return _ERROR_TYPES.get(status, "api_error")


def _error_json(status: int, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": _error_type(status), "message": message}}


def signature_of(thinking: str) -> str:
    """The signature this fake gives a thinking block, and checks when it comes back."""
    return "sig-" + hashlib.sha256(thinking.encode()).hexdigest()[:32]


def refusal(body: Any) -> str | None:
    """Why the real API would refuse this request body with a 400, if it would."""
    if not isinstance(body, dict):
        return "the body must be a JSON object"
    max_tokens = body.get("max_tokens")
    if not isinstance(max_tokens, int) or max_tokens < 1:
        return "max_tokens: Field required"
    temperature = body.get("temperature")
    if temperature is not None and not 0 <= temperature <= 1:
        return "temperature: Input should be less than or equal to 1"
    thinking = body.get("thinking") or {}
    thinking_on = thinking.get("type") == "enabled"
    if thinking_on:
        budget = thinking.get("budget_tokens")
        if not isinstance(budget, int) or budget < 1024:
            return "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024"
        if budget >= max_tokens:
            return "`max_tokens` must be greater than `thinking.budget_tokens`"
        if temperature is not None and temperature != 1:
            return "`temperature` may only be set to 1 when thinking is enabled"
        forced = (body.get("tool_choice") or {}).get("type")
        if forced in ("any", "tool"):
            return "Thinking may not be enabled when tool_choice forces tool use."
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return "messages: at least one message is required"
    if messages[0].get("role") != "user":
        return "messages: the first message must use the 'user' role"
    offered: set[str] = set()
    for index, message in enumerate(messages):
        role = message.get("role")
        if index and role == messages[index - 1].get("role"):
            return f"messages.{index}: roles must alternate between 'user' and 'assistant'"
        content = message.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        for block in blocks or []:
            kind = block.get("type")
            if kind == "text" and not block.get("text"):
                return f"messages.{index}: text content blocks must be non-empty"
            if kind == "thinking" and block.get("signature") != signature_of(
                str(block.get("thinking"))
            ):
                return f"messages.{index}: Invalid `signature` in `thinking` block"
            if kind == "tool_result" and block.get("tool_use_id") not in offered:
                return (
                    f"messages.{index}: unexpected `tool_use_id` found in `tool_result` blocks: "
                    f"{block.get('tool_use_id')}. Each `tool_result` block must have a "
                    "corresponding `tool_use` block in the previous message."
                )
        answered = {
            str(b.get("tool_use_id"))
            for b in blocks or []
            if isinstance(b, dict) and b.get("type") == "tool_result"
        }
        if role == "user" and offered - answered:
            return (
                f"messages.{index - 1}: `tool_use` ids were found without `tool_result` blocks "
                f"immediately after: {sorted(offered - answered)[0]}"
            )
        offered = {
            b["id"] for b in blocks or [] if isinstance(b, dict) and b.get("type") == "tool_use"
        }
        loop = role == "assistant" and offered and index + 2 == len(messages)
        if thinking_on and loop and (blocks or [{}])[0].get("type") not in _THINKING:
            return (
                f"messages.{index}.content.0.type: Expected `thinking` or `redacted_thinking`, "
                f"but found `{(blocks or [{}])[0].get('type')}`. When `thinking` is enabled, a "
                "final `assistant` message must start with a thinking block."
            )
    return None


_THINKING = ("thinking", "redacted_thinking")


def heard(body: dict[str, Any]) -> Heard:
    """The transcript as the scripts hear it: each message's text, in Chat Completions' shape."""
    chat: list[dict[str, Any]] = []
    for message in body["messages"]:
        content = message.get("content")
        if isinstance(content, str):
            text = content
        else:
            text = "\n".join(
                str(b.get("text") or b.get("content") or "")
                for b in content or []
                if isinstance(b, dict) and b.get("type") in ("text", "tool_result")
            )
        is_result = isinstance(content, list) and any(
            isinstance(b, dict) and b.get("type") == "tool_result" for b in content
        )
        chat.append({"role": "tool" if is_result else message.get("role"), "content": text})
    return Heard.of(chat)


class FakeAnthropicServer(FakeOpenAIServer):
    """`POST /v1/messages` as Anthropic serves it; `base_url` is what `AsyncAnthropic` takes
    (the SDK adds `/v1/messages`). Scripted as `FakeOpenAIServer` is, per the call's
    `x-think-conversation-id` header; `requests()` holds each body as sent."""

    def __init__(self, *, model: str = "claude-fake", host: str = "127.0.0.1") -> None:
        super().__init__(model=model, host=host)
        self._message_ids = itertools.count(1)
        self.app.router.routes.append(Route("/v1/messages", self._messages, methods=["POST"]))

    @property
    def base_url(self) -> str:
        return super().base_url.removesuffix("/v1")

    async def _messages(self, request: Request) -> Response:
        headers = {k.lower(): v for k, v in request.headers.items()}
        conversation_id = headers.get(CONVERSATION_HEADER)
        try:
            body = json.loads(await request.body())
        except ValueError:
            body = None
        if not (headers.get("x-api-key") or headers.get("authorization")):
            return JSONResponse(_error_json(401, "x-api-key header is required"), 401)
        why = refusal(body)
        if why is not None:
            return JSONResponse(_error_json(400, why), status_code=400)
        if not body.get("stream"):
            return JSONResponse(_error_json(400, "this fake streams only: send stream: true"), 400)
        with self._lock:
            self._requests.append(
                (conversation_id, {"path": request.url.path, "headers": headers, "body": body})
            )
        plan = plan_of(self._next_reply(conversation_id), heard(body))
        return _PlayedMessages(
            plan, model=str(body.get("model") or self.model), message_id=next(self._message_ids)
        )


class _PlayedMessages(Response):
    """Plays a compiled reply as the Messages API's event stream."""

    def __init__(self, plan: Plan, *, model: str, message_id: int) -> None:
        super().__init__()
        self.plan = plan
        self.model = model
        self.message_id = f"msg_fake{message_id:06d}"
        self.started = False
        self.index = -1
        self.open: str | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        for action in self.plan.actions:
            if isinstance(action, Sleep):
                if not await _sleep(action.seconds, receive):
                    return
            elif isinstance(action, ErrorStep):
                await self._fail(action, send)
                return
            elif isinstance(action, DisconnectStep):
                await self._begin(send)
                raise _ScriptedDisconnect
            elif isinstance(action, Chunk):
                kind = "text" if action.kind == "text" else "thinking"
                if self.open != kind:
                    await self._open_block(
                        send,
                        kind,
                        {kind: ""} if kind == "text" else {"thinking": "", "signature": ""},
                    )
                field, delta_type = (
                    ("text", "text_delta") if kind == "text" else ("thinking", "thinking_delta")
                )
                await self._event(
                    send,
                    "content_block_delta",
                    {"index": self.index, "delta": {"type": delta_type, field: action.text}},
                )
                if kind == "thinking":
                    self.thought.append(action.text)
            elif isinstance(action, ToolStart):
                await self._open_block(
                    send, "tool_use", {"id": action.id, "name": action.name, "input": {}}
                )
            elif isinstance(action, ToolArgs):
                delta = {"type": "input_json_delta", "partial_json": action.fragment}
                await self._event(
                    send, "content_block_delta", {"index": self.index, "delta": delta}
                )
            elif isinstance(action, RawDelta):
                continue  # a Chat Completions shape: nothing of Anthropic's
        await self._close_block(send)
        usage = self.plan.usage
        await self._event(
            send,
            "message_delta",
            {
                "delta": {
                    "stop_reason": _STOP_REASONS.get(self.plan.finish_reason, "end_turn"),
                    "stop_sequence": None,
                },
                "usage": {"output_tokens": usage.output_tokens},
            },
        )
        await self._event(send, "message_stop", {}, more=False)

    def _usage(self, usage: Usage) -> dict[str, int]:
        """Anthropic counts the uncached input apart from the cache's reads and writes."""
        return {
            "input_tokens": usage.input_tokens
            - usage.cached_input_tokens
            - usage.cache_write_tokens,
            "cache_read_input_tokens": usage.cached_input_tokens,
            "cache_creation_input_tokens": usage.cache_write_tokens,
            "output_tokens": 1,
        }

    async def _begin(self, send: Send) -> None:
        if self.started:
            return
        self.started = True
        headers = [
            (b"content-type", b"text/event-stream; charset=utf-8"),
            (b"cache-control", b"no-cache"),
            (b"request-id", f"req_{self.message_id}".encode()),
        ]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        message: dict[str, Any] = {
            "id": self.message_id,
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": self._usage(self.plan.usage),
        }
        await self._event(send, "message_start", {"message": message})
        await self._event(send, "ping", {})

    async def _open_block(self, send: Send, kind: str, fields: dict[str, Any]) -> None:
        await self._close_block(send)
        self.index += 1
        self.open = kind
        self.thought = list[str]()
        block = {"type": kind, **fields}
        await self._event(
            send, "content_block_start", {"index": self.index, "content_block": block}
        )

    async def _close_block(self, send: Send) -> None:
        if self.open is None:
            await self._begin(send)
            return
        if self.open == "thinking":
            signature = signature_of("".join(self.thought))
            delta = {"type": "signature_delta", "signature": signature}
            await self._event(send, "content_block_delta", {"index": self.index, "delta": delta})
        await self._event(send, "content_block_stop", {"index": self.index})
        self.open = None

    async def _event(
        self, send: Send, name: str, payload: dict[str, Any], *, more: bool = True
    ) -> None:
        if name != "message_start":
            await self._begin(send)
        data = json.dumps({"type": name, **payload}, separators=(",", ":"))
        chunk = f"event: {name}\ndata: {data}\n\n".encode()
        await send({"type": "http.response.body", "body": chunk, "more_body": more})

    async def _fail(self, step: ErrorStep, send: Send) -> None:
        if not self.started:
            body = json.dumps(_error_json(step.status, step.message)).encode()
            headers = [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
            ]
            if step.retry_after is not None:
                headers.append((b"retry-after", step.retry_after.encode()))
            await send({"type": "http.response.start", "status": step.status, "headers": headers})
            await send({"type": "http.response.body", "body": body, "more_body": False})
            return
        await self._event(send, "error", _error_json(step.status, step.message), more=False)
