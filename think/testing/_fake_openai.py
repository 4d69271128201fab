"""A real OpenAI-compatible HTTP server that plays scripted replies.

Real HTTP on purpose: the bugs worth catching live in the OpenAI SDK's streaming parser, in
connection reuse, timeouts and dropped connections, none of which an in-process fake exercises.
It runs in a thread with its own event loop, so it serves a sync test, an async test on any
loop, and a Temporal worker in the same process alike.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import socket
import threading
import time
from collections import deque
from collections.abc import Mapping, MutableMapping
from typing import Any, TypedDict

import orjson
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from think.models import METADATA_HEADER_PREFIX
from think.storage import collector_paused
from think.testing._replies import Heard, ReplyQueue, plan_of
from think.testing._script import (
    Chunk,
    DisconnectStep,
    ErrorStep,
    Plan,
    RawDelta,
    Reply,
    Sleep,
    ToolArgs,
    ToolStart,
)

CONVERSATION_HEADER = METADATA_HEADER_PREFIX + "conversation-id"


class RecordedRequest(TypedDict):
    path: str
    headers: dict[str, str]
    """Lower-cased names, e.g. `x-think-conversation-id`, `x-think-turn-id`, `authorization`."""
    body: dict[str, Any]


class _ScriptedDisconnect(Exception):
    """Raised to make uvicorn drop the connection mid-response, which is what a crash looks like."""


class _QuietScriptedDisconnects(logging.Filter):
    """Keep uvicorn from logging a traceback for a disconnect the test asked for."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.exc_info and isinstance(record.exc_info[1], _ScriptedDisconnect))


_QUIET = _QuietScriptedDisconnects()


class _Server(uvicorn.Server):
    """Tells the starting thread when the socket accepts connections."""

    def __init__(self, config: uvicorn.Config, ready: threading.Event) -> None:
        super().__init__(config)
        self.ready = ready

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        self.ready.set()


class FakeOpenAIServer:
    """`POST /v1/chat/completions` (streaming or not) and `GET /v1/models`, on 127.0.0.1.

    Replies are chosen per call: the next one scripted for the call's `x-think-conversation-id`
    header, else the next default one, else an echo of the last user message
    (`"echo: <text>"`). Use it as a context manager, or `start()` and `stop()`::

        with FakeOpenAIServer() as server:
            server.script("c1", text("Hi!"), tool_call("get_weather", {"city": "Paris"}))
            model = OpenAIModel("fake", base_url=server.base_url, api_key="test")
    """

    def __init__(
        self, *, model: str = "fake-model", host: str = "127.0.0.1", keep: int | None = None
    ) -> None:
        """`keep`: how many requests to keep for `requests()` (None: all). A benchmark that
        sends thousands of ever longer transcripts sets 0: the parsed requests it would hold
        (and the garbage collector's passes over them) would slow the process measuring, and
        a server that keeps none parses a transcript that grew only from where it grew
        (`_Transcripts`), so its own work stays the same as the conversation grows."""
        self.model = model
        self.host = host
        self._lock = threading.Lock()
        self._queues: dict[str | None, ReplyQueue] = {}
        self._requests: deque[tuple[str | None, RecordedRequest]] = deque(maxlen=keep)
        self._keeps_none = keep == 0
        self._transcripts = _Transcripts()
        self._ids = itertools.count(1)
        self._port: int | None = None
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._failure: BaseException | None = None
        self.app = Starlette(
            routes=[
                Route("/v1/chat/completions", self._chat_completions, methods=["POST"]),
                Route("/v1/models", self._models, methods=["GET"]),
            ]
        )

    # --- scripting and inspection (any thread) ---

    def script(self, conversation_id: str, *replies: Reply, repeat: bool = False) -> None:
        """Queue replies for calls of this conversation; `repeat` cycles them forever."""
        self._enqueue(conversation_id, replies, repeat)

    def script_default(self, *replies: Reply, repeat: bool = False) -> None:
        """Queue replies for calls that have nothing scripted for their conversation."""
        self._enqueue(None, replies, repeat)

    def requests(self, conversation_id: str | None = None) -> list[RecordedRequest]:
        """Chat completion requests received, oldest first; all of them when no id is given."""
        with self._lock:
            return [r for c, r in self._requests if conversation_id is None or c == conversation_id]

    def calls(self, conversation_id: str | None = None) -> int:
        return len(self.requests(conversation_id))

    def pending(self, conversation_id: str | None = None) -> int:
        """Scripted replies not played yet (default queue when no id): assert it reaches 0.

        A `repeat` queue never runs out, so it counts as 0.
        """
        with self._lock:
            queue = self._queues.get(conversation_id)
            return queue.pending if queue else 0

    def reset(self) -> None:
        with self._lock:
            self._queues.clear()
            self._requests.clear()

    def _enqueue(self, key: str | None, replies: tuple[Reply, ...], repeat: bool) -> None:
        with self._lock:
            self._queues.setdefault(key, ReplyQueue()).add(replies, repeat=repeat)

    def _next_reply(self, conversation_id: str | None) -> Reply | None:
        """The next reply scripted for the conversation, else the next default one."""
        with self._lock:
            for key in (conversation_id, None):
                queue = self._queues.get(key)
                found = queue.take() if queue else None
                if found is not None:
                    return found
        return None

    # --- lifecycle ---

    @property
    def base_url(self) -> str:
        if self._port is None:
            raise RuntimeError("FakeOpenAIServer is not started: use `with` or call start()")
        return f"http://{self.host}:{self._port}/v1"

    def start(self) -> FakeOpenAIServer:
        if self._thread is not None:
            return self
        logging.getLogger("uvicorn.error").addFilter(_QUIET)
        # IPPROTO_TCP spelled out: asyncio only sets TCP_NODELAY on accepted sockets whose proto
        # says TCP, and without it every keep-alive response waits out a 40 ms delayed ACK.
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.host, 0))
        self._port = sock.getsockname()[1]
        config = uvicorn.Config(
            self.app,
            log_config=None,  # never reconfigure the host application's logging
            lifespan="off",
            ws="none",
            timeout_keep_alive=300,  # idle pooled connections must not race a server-side close
            timeout_graceful_shutdown=1,
        )
        self._server = _Server(config, self._ready)
        self._ready.clear()
        self._failure = None
        self._thread = threading.Thread(
            target=self._run, args=(sock,), name=f"FakeOpenAIServer:{self._port}", daemon=True
        )
        self._thread.start()
        if not self._ready.wait(timeout=10) or self._failure or not self._server.started:
            self.stop()
            raise RuntimeError("FakeOpenAIServer failed to start") from self._failure
        return self

    def stop(self) -> None:
        server, thread = self._server, self._thread
        if server is not None:
            server.should_exit = True
            server.force_exit = True  # streams still open are test leftovers, not work to finish
        if thread is not None:
            thread.join(timeout=10)
        self._server = self._thread = None

    def __enter__(self) -> FakeOpenAIServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def _run(self, sock: socket.socket) -> None:
        assert self._server is not None
        try:
            asyncio.run(self._server.serve(sockets=[sock]))
        except BaseException as exc:  # uvicorn exits via SystemExit on startup failure
            self._failure = exc
        finally:
            self._ready.set()
            sock.close()

    # --- HTTP ---

    async def _models(self, request: Request) -> Response:
        return JSONResponse(
            {
                "object": "list",
                "data": [{"id": self.model, "object": "model", "created": 0, "owned_by": "think"}],
            }
        )

    async def _chat_completions(self, request: Request) -> Response:
        headers = {k.lower(): v for k, v in request.headers.items()}
        conversation_id = headers.get(CONVERSATION_HEADER)
        raw = await request.body()
        try:
            with collector_paused():
                if self._keeps_none:
                    heard = self._transcripts.hear(conversation_id, raw)
                else:
                    heard = _heard_in_full(raw)
        except ValueError:
            heard = None
        if heard is None:
            return _error_response(ErrorStep(status=400, message="'messages' is required"))
        body, transcript = heard
        if not self._keeps_none:
            with self._lock:
                self._requests.append(
                    (conversation_id, {"path": request.url.path, "headers": headers, "body": body})
                )
        return _Played(
            plan_of(self._next_reply(conversation_id), transcript),
            model=str(body.get("model") or self.model),
            stream=bool(body.get("stream")),
            include_usage=bool((body.get("stream_options") or {}).get("include_usage")),
            completion_id=f"chatcmpl-fake{next(self._ids)}",
        )


def _heard_in_full(raw: bytes) -> tuple[dict[str, Any], Heard] | None:
    """The request's body, parsed, and what was heard of its transcript; None if it has none.

    orjson: a long conversation's request is hundreds of KiB, parsed with the garbage collector
    paused (docs/benchmarks.md, "Figures behind code comments")."""
    body = orjson.loads(raw)
    if not isinstance(body, dict) or not isinstance(messages := body.get("messages"), list):
        return None
    return body, Heard.of(messages)


class _Transcripts:
    """What a server that keeps no requests heard of each conversation's last transcript, so
    that one which only grew since is parsed from where it grew.

    Without it, the scripted model's own work grows with the conversation, and sits on every
    model step's path: at turn 1,000 parsing and counting the whole transcript was most of what
    a benchmark measured as the turn's growth (docs/benchmarks.md, "Figures behind code
    comments"). A real model's server does that work in native code, or from a prompt cache.

    The worker sends `messages` last and compactly (`think.models._openai.request_json`), so a
    transcript that grew is the last request's bytes up to its last message, a comma, the new
    messages, and `]}`; the same bytes up to there are the same messages. Any other request is
    parsed whole (and, if it ends so, kept as the next one's start)."""

    LIMIT = 1024
    """Conversations remembered, the most recent; a forgotten one is parsed whole once."""

    def __init__(self) -> None:
        self._last: dict[str, tuple[bytes, dict[str, Any], Heard]] = {}

    def hear(self, conversation_id: str | None, raw: bytes) -> tuple[dict[str, Any], Heard] | None:
        """The body's fields but its messages, and what was heard of its transcript."""
        if conversation_id and (last := self._last.pop(conversation_id, None)) is not None:
            start, fields, heard = last
            grew = raw[len(start) : len(start) + 1] == b"," and raw.endswith(b"]}")
            if grew and raw.startswith(start):
                with contextlib.suppress(ValueError):  # e.g. a field after `messages`
                    more = orjson.loads(b"[" + raw[len(start) + 1 : -1])
                    if all(isinstance(m, dict) for m in more):
                        heard = heard.extended(more)
                        self._remember(conversation_id, raw, fields, heard)
                        return fields, heard
        parsed = _heard_in_full(raw)
        if parsed is None:
            return None
        body, heard = parsed
        fields = {k: v for k, v in body.items() if k != "messages"}
        ends_with_messages = next(reversed(body)) == "messages" and raw.endswith(b"]}")
        if conversation_id and body["messages"] and ends_with_messages:
            self._remember(conversation_id, raw, fields, heard)
        return fields, heard

    def _remember(
        self, conversation_id: str, raw: bytes, fields: dict[str, Any], heard: Heard
    ) -> None:
        """`raw` (which ends with its messages' `]}`) as the start of the next request."""
        self._last[conversation_id] = (raw[:-2], fields, heard)
        while len(self._last) > self.LIMIT:
            del self._last[next(iter(self._last))]


def _error_body(step: ErrorStep) -> dict[str, Any]:
    return {"message": step.message, "type": step.type, "param": None, "code": step.code}


def _error_response(step: ErrorStep) -> Response:
    return JSONResponse({"error": _error_body(step)}, status_code=step.status)


class _Played(Response):
    """Plays a compiled reply straight onto the ASGI connection, so it can stall and drop it."""

    def __init__(
        self, plan: Plan, *, model: str, stream: bool, include_usage: bool, completion_id: str
    ) -> None:
        super().__init__()
        self.plan = plan
        self.model = model
        self.stream = stream
        self.include_usage = include_usage
        self.completion_id = completion_id
        self.created = int(time.time())
        self.started = False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.plan.burst and self.stream:
            send = _Burst(send)
        for action in self.plan.actions:
            if isinstance(action, Sleep):
                if not await _sleep(action.seconds, receive):
                    return  # the client gave up; nobody is listening any more
            elif isinstance(action, ErrorStep):
                await self._fail(action, send)
                return
            elif isinstance(action, DisconnectStep):
                await self._start(send, content_length=None if self.stream else 1024)
                raise _ScriptedDisconnect
            elif isinstance(action, RawDelta) and isinstance(action.delta, str):
                if self.stream:
                    await self._send_raw_chunk(send, action.delta)
            elif self.stream:
                await self._send_chunk(send, _delta(action))
        if not self.stream:
            await _send_json(send, 200, self._completion())
            return
        await self._send_chunk(send, {}, finish_reason=self.plan.finish_reason)
        if self.include_usage:
            await self._send_data(send, self._envelope([], usage=self._usage()))
        await self._send(send, b"data: [DONE]\n\n", more=False)

    async def _fail(self, step: ErrorStep, send: Send) -> None:
        if not self.started:
            hint = {} if step.retry_after is None else {"retry-after": step.retry_after}
            await _send_json(send, step.status, {"error": _error_body(step)}, hint)
            return
        # Mid-stream, the status line is long gone: vLLM-style, with the status as `code`.
        await self._send_data(send, {"error": {**_error_body(step), "code": step.status}})
        await self._send(send, b"", more=False)

    async def _start(self, send: Send, content_length: int | None = None) -> None:
        if self.started:
            return
        self.started = True
        headers = [(b"x-request-id", self.completion_id.encode())]
        if content_length is None:
            headers += [(b"content-type", b"text/event-stream; charset=utf-8")]
            headers += [(b"cache-control", b"no-cache")]
        else:
            headers += [(b"content-type", b"application/json")]
            headers += [(b"content-length", str(content_length).encode())]
        await send({"type": "http.response.start", "status": 200, "headers": headers})

    async def _send(self, send: Send, data: bytes, *, more: bool = True) -> None:
        await self._start(send)
        await send({"type": "http.response.body", "body": data, "more_body": more})

    async def _send_data(self, send: Send, payload: dict[str, Any]) -> None:
        await self._send(
            send, b"data: " + json.dumps(payload, separators=(",", ":")).encode() + b"\n\n"
        )

    async def _send_chunk(
        self, send: Send, delta: dict[str, Any], finish_reason: str | None = None
    ) -> None:
        if not self.started:
            opening = {"role": "assistant", "content": "", "refusal": None}
            await self._send_data(send, self._envelope([_choice(opening, None)]))
        await self._send_data(send, self._envelope([_choice(delta, finish_reason)]))

    async def _send_raw_chunk(self, send: Send, delta: str) -> None:
        """A chunk whose delta is `delta`, verbatim JSON text (`RawStep`)."""
        if not self.started:
            opening = {"role": "assistant", "content": "", "refusal": None}
            await self._send_data(send, self._envelope([_choice(opening, None)]))
        envelope = json.dumps(self._envelope([_choice({}, None)]), separators=(",", ":")).encode()
        assert envelope.count(b'"delta":{}') == 1
        data = envelope.replace(b'"delta":{}', b'"delta":' + delta.encode(), 1)
        await self._send(send, b"data: " + data + b"\n\n")

    def _envelope(self, choices: list[dict[str, Any]], usage: Any = None) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "id": self.completion_id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "system_fingerprint": "fp_think_fake",
            "choices": choices,
        }
        if self.include_usage:
            payload["usage"] = usage
        return payload

    def _usage(self) -> dict[str, Any]:
        """As OpenAI sends it: the details objects always, cache writes only when there were
        some (OpenRouter's and LiteLLM's field; OpenAI's caching writes for free)."""
        usage = self.plan.usage
        prompt: dict[str, int] = {"cached_tokens": usage.cached_input_tokens}
        if usage.cache_write_tokens:
            prompt["cache_write_tokens"] = usage.cache_write_tokens
        return {
            "prompt_tokens": usage.input_tokens,
            "completion_tokens": usage.output_tokens,
            "total_tokens": usage.total_tokens,
            "prompt_tokens_details": prompt,
            "completion_tokens_details": {"reasoning_tokens": usage.reasoning_tokens},
        }

    def _completion(self) -> dict[str, Any]:
        message: dict[str, Any] = {
            "role": "assistant",
            "content": self.plan.text or None,
            "refusal": None,
        }
        if self.plan.reasoning:
            message["reasoning_content"] = self.plan.reasoning
        if self.plan.tool_calls:
            message["tool_calls"] = [
                {"id": id_, "type": "function", "function": {"name": name, "arguments": args}}
                for id_, name, args in self.plan.tool_calls
            ]
        return {
            "id": self.completion_id,
            "object": "chat.completion",
            "created": self.created,
            "model": self.model,
            "system_fingerprint": "fp_think_fake",
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "logprobs": None,
                    "finish_reason": self.plan.finish_reason,
                }
            ],
            "usage": self._usage(),
        }


def _choice(delta: dict[str, Any], finish_reason: str | None) -> dict[str, Any]:
    return {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}


def _delta(action: Chunk | ToolStart | ToolArgs | RawDelta) -> dict[str, Any]:
    if isinstance(action, RawDelta):
        assert isinstance(action.delta, dict)
        return action.delta
    if isinstance(action, Chunk):
        return (
            {"content": action.text}
            if action.kind == "text"
            else {"reasoning_content": action.text}
        )
    if isinstance(action, ToolStart):
        function = {"name": action.name, "arguments": ""}
        call = {"index": action.index, "id": action.id, "type": "function", "function": function}
        return {"tool_calls": [call]}
    return {"tool_calls": [{"index": action.index, "function": {"arguments": action.fragment}}]}


class _Burst:
    """An ASGI `send` that holds a response's body back until its last part, then sends it
    whole: one write on the connection (`Reply.burst`)."""

    def __init__(self, send: Send) -> None:
        self._send = send
        self._held: list[bytes] = []

    async def __call__(self, message: MutableMapping[str, Any]) -> None:
        if message["type"] != "http.response.body":
            await self._send(message)
            return
        self._held.append(message.get("body", b""))
        if not message.get("more_body", False):
            await self._send({"type": "http.response.body", "body": b"".join(self._held)})


async def _send_json(
    send: Send, status: int, payload: dict[str, Any], extra: Mapping[str, str] | None = None
) -> None:
    body = json.dumps(payload).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    headers += [(k.encode(), v.encode()) for k, v in (extra or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})


async def _sleep(seconds: float, receive: Receive) -> bool:
    """Sleep, but wake early and return False if the client disconnects meanwhile."""
    watcher = asyncio.ensure_future(receive())
    try:
        await asyncio.wait({watcher}, timeout=seconds)
    finally:
        if not watcher.done():
            watcher.cancel()
    return not (watcher.done() and not watcher.cancelled() and _is_disconnect(watcher.result()))


def _is_disconnect(message: Any) -> bool:
    return isinstance(message, dict) and message.get("type") == "http.disconnect"
