"""A fake of OpenAI's Responses API on 127.0.0.1, played from the same scripts as
`FakeOpenAIServer` (`text`, `reasoning`, `tool_call`, `error`, `stall`, `disconnect`,
`reply(usage=...)`), so a test scripts a conversation once and points it at any protocol.

It speaks the API's event stream as the real one does: every event numbered (`sequence_number`),
`response.created` and `response.in_progress`, then each output item opened
(`response.output_item.added`), filled (`response.output_text.delta`,
`response.reasoning_summary_text.delta`, `response.function_call_arguments.delta`) and closed
(`response.output_item.done`, a reasoning item's encrypted content in it when asked for with
`include`), and `response.completed` (or `response.incomplete`) with the usage; a scripted
error after the stream began is `response.failed` (a server fault) or an `error` event.
A reply of `raw_events(...)` is played verbatim instead: another server's stream, as it sends
it (tests/models/test_responses_streams.py).

A response runs on the server, apart from the connection that asked for it: in background mode
it goes on when that connection drops (or a scripted `disconnect()` cuts it), and
`GET /v1/responses/{id}?stream=true&starting_after=N` streams it again from after event N;
`POST /v1/responses/{id}/cancel` stops it. Without background mode a dropped connection ends
the response, as the real API's does.

It refuses what the real API refuses: unknown parameters (`seed`, `stop`), a function tool whose
schema is not strict while `strict` is on (the default here), a `function_call_output` that
answers no call, a reasoning item handed back without what followed it, or, with `store` off,
without its encrypted content, encrypted content it did not issue, reasoning settings or
encrypted content for a model that does not reason, background mode without `store`.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from dataclasses import dataclass, field
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from think.models import METADATA_HEADER_PREFIX, Usage
from think.testing._fake_openai import FakeOpenAIServer, _is_disconnect, _ScriptedDisconnect
from think.testing._replies import plan_of
from think.testing._responses_rules import Refused, check, heard, seal
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

_INCOMPLETE = {"length": "max_output_tokens", "content_filter": "content_filter"}
_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "invalid_request_error",
    403: "invalid_request_error",
    404: "invalid_request_error",
    429: "rate_limit_exceeded",
}


class FakeResponsesServer(FakeOpenAIServer):
    """`POST /v1/responses` as OpenAI serves it, beside the Chat Completions of
    `FakeOpenAIServer` (OpenAI serves both at one base URL). Scripted as that one is, per the
    call's `x-think-conversation-id` header; `requests()` holds each `POST /v1/responses` body
    (the model's work: one per answer asked for), `retrievals()` each response streamed again."""

    def __init__(self, *, model: str = "gpt-fake", host: str = "127.0.0.1") -> None:
        super().__init__(model=model, host=host)
        self._response_ids = itertools.count(1)
        self._responses: dict[str, _Running] = {}
        self._retrievals: list[tuple[str, int | None]] = []
        self._created: list[tuple[str | None, str]] = []
        self.app.router.routes += [
            Route("/v1/responses", self._create, methods=["POST"]),
            Route("/v1/responses/{id}", self._retrieve, methods=["GET"]),
            Route("/v1/responses/{id}/cancel", self._cancel, methods=["POST"]),
        ]

    def retrievals(self) -> list[tuple[str, int | None]]:
        """Each `GET /v1/responses/{id}`: (response id, its `starting_after`)."""
        with self._lock:
            return list(self._retrievals)

    def responses(self, conversation_id: str | None = None) -> list[str]:
        """The ids of the responses created for this conversation's calls (all: None)."""
        with self._lock:
            return [r for c, r in self._created if conversation_id is None or c == conversation_id]

    def status(self, response_id: str) -> str | None:
        """A response's status (`in_progress`, `completed`, `cancelled`, ...); None: unknown."""
        running = self._responses.get(response_id)
        return running.status if running else None

    async def _create(self, request: Request) -> Response:
        headers = {k.lower(): v for k, v in request.headers.items()}
        conversation_id = headers.get(CONVERSATION_HEADER)
        try:
            body = json.loads(await request.body())
            check(body)
        except ValueError:
            return _refusal(Refused(400, "The request body is not valid JSON."))
        except Refused as refused:
            return _refusal(refused)
        if not body.get("stream"):
            return _refusal(Refused(400, "This fake streams only: send `stream: true`.", "stream"))
        with self._lock:
            self._requests.append(
                (conversation_id, {"path": request.url.path, "headers": headers, "body": body})
            )
        plan = plan_of(self._next_reply(conversation_id), heard(body))
        running = _Running(
            f"resp_fake{next(self._response_ids):06d}",
            plan,
            model=str(body["model"]),
            background=bool(body.get("background")),
            store=body.get("store", True) is not False,
            seal="reasoning.encrypted_content" in (body.get("include") or []),
        )
        early = running.early_error()
        if early is not None:
            await asyncio.sleep(early[0])
            return _refusal(Refused(early[1].status, early[1].message), early[1].retry_after)
        self._responses[running.id] = running
        with self._lock:
            self._created.append((conversation_id, running.id))
        running.start()
        return _Tail(running, after=None, owner=True)

    async def _retrieve(self, request: Request) -> Response:
        response_id = request.path_params["id"]
        after = request.query_params.get("starting_after")
        with self._lock:
            self._retrievals.append((response_id, int(after) if after else None))
        running = self._responses.get(response_id)
        if running is None or not running.store:
            return _refusal(Refused(404, f"Response with id '{response_id}' not found."))
        if request.query_params.get("stream") != "true":
            return JSONResponse(running.snapshot())
        return _Tail(running, after=int(after) if after else None, owner=False)

    async def _cancel(self, request: Request) -> Response:
        running = self._responses.get(request.path_params["id"])
        if running is None or not running.store:
            return _refusal(
                Refused(404, f"Response with id '{request.path_params['id']}' not found.")
            )
        if not running.background:
            return _refusal(Refused(400, "Only background responses can be cancelled."))
        running.cancel()
        return JSONResponse(running.snapshot())


def _refusal(refused: Refused, retry_after: str | None = None) -> Response:
    error = {
        "message": str(refused),
        "type": _ERROR_TYPES.get(refused.status, "server_error"),
        "param": refused.param,
        "code": None,
    }
    headers = {"retry-after": retry_after} if retry_after else None
    return JSONResponse({"error": error}, status_code=refused.status, headers=headers)


@dataclass
class _Running:
    """A response being generated, apart from any connection: its events so far, numbered
    by their place in `events`; `drops` are the places where a scripted disconnect cuts the
    connection that reaches them first."""

    id: str
    plan: Plan
    model: str
    background: bool
    store: bool
    seal: bool
    events: list[bytes] = field(default_factory=list)
    drops: set[int] = field(default_factory=set)
    status: str = "queued"
    done: bool = False
    output: list[dict[str, Any]] = field(default_factory=list)
    _changed: asyncio.Event = field(default_factory=asyncio.Event)
    _task: asyncio.Task[None] | None = None
    _open: dict[str, Any] | None = None
    _usage: dict[str, Any] | None = None
    _error: dict[str, Any] | None = None

    def early_error(self) -> tuple[float, ErrorStep] | None:
        """A scripted error before anything is said: an HTTP error, after the sleeps before it."""
        waited = 0.0
        for action in self.plan.actions:
            if isinstance(action, Sleep):
                waited += action.seconds
            elif isinstance(action, ErrorStep):
                return waited, action
            else:
                return None
        return None

    def start(self) -> None:
        self._task = asyncio.ensure_future(self._play())

    def cancel(self) -> None:
        if self._task is not None and not self.done:
            self._task.cancel()
            self.status = "cancelled"
            self._end()

    def abandoned(self) -> None:
        """Its connection dropped: a response that is not in background mode ends there."""
        if not self.background:
            self.cancel()

    def snapshot(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": "response",
            "created_at": int(time.time()),
            "status": self.status,
            "background": self.background,
            "store": self.store,
            "model": self.model,
            "output": self.output,
            "usage": self._usage,
            "error": self._error,
            "incomplete_details": (
                {"reason": _INCOMPLETE[self.plan.finish_reason]}
                if self.status == "incomplete"
                else None
            ),
        }

    def _event(self, kind: str, **fields: Any) -> None:
        self._frame({"type": kind, "sequence_number": len(self.events), **fields})

    def _frame(self, event: dict[str, Any] | str) -> None:
        """One SSE frame: an event with its name, or (a str) a frame's text as it is."""
        if isinstance(event, str):
            frame = event if event.endswith("\n\n") else event.rstrip("\n") + "\n\n"
        else:
            data = json.dumps(event, separators=(",", ":"))
            frame = f"event: {event.get('type')}\ndata: {data}\n\n"
        self.events.append(frame.encode())
        self._changed.set()
        self._changed = asyncio.Event()

    def _end(self) -> None:
        self.done = True
        self._changed.set()

    async def wait(self, known: int) -> None:
        """Until there are more than `known` events, or the response is done."""
        while len(self.events) <= known and not self.done:
            await self._changed.wait()

    async def _play(self) -> None:
        if any(isinstance(action, RawDelta) for action in self.plan.actions):
            await self._play_verbatim()
            return
        self._event("response.created", response=self.snapshot())
        self.status = "in_progress"
        self._event("response.in_progress", response=self.snapshot())
        for action in self.plan.actions:
            if isinstance(action, Sleep):
                await asyncio.sleep(action.seconds)
            elif isinstance(action, ErrorStep):
                self._close_item()
                self._fail(action)
                return
            elif isinstance(action, DisconnectStep):
                self.drops.add(len(self.events))
                self._changed.set()
                self._changed = asyncio.Event()
                await asyncio.sleep(0.05)  # the connection goes before the response goes on
            elif isinstance(action, Chunk):
                self._chunk(action)
            elif isinstance(action, ToolStart):
                self._close_item()
                item = {
                    "type": "function_call",
                    "id": f"fc_{action.id}",
                    "call_id": action.id,
                    "name": action.name,
                    "arguments": "",
                    "status": "in_progress",
                }
                self._open_item(item)
            elif isinstance(action, ToolArgs) and self._open is not None:
                self._open["arguments"] += action.fragment
                self._event(
                    "response.function_call_arguments.delta",
                    item_id=self._open["id"],
                    output_index=len(self.output),
                    delta=action.fragment,
                )
        self._close_item()
        self._usage = usage_json(self.plan.usage)
        incomplete = self.plan.finish_reason in _INCOMPLETE
        self.status = "incomplete" if incomplete else "completed"
        kind = "response.incomplete" if incomplete else "response.completed"
        self._event(kind, response=self.snapshot())
        self._end()

    async def _play_verbatim(self) -> None:
        """`raw_events`: each frame as scripted, nothing of the fake's own; the response ends
        (and its connection closes) after the last."""
        for action in self.plan.actions:
            if isinstance(action, Sleep):
                await asyncio.sleep(action.seconds)
            elif isinstance(action, RawDelta):
                self._frame(action.delta)
        self.status = "completed"
        self._end()

    def _chunk(self, chunk: Chunk) -> None:
        kind = "message" if chunk.kind == "text" else "reasoning"
        if self._open is None or self._open["type"] != kind:
            self._close_item()
            if kind == "message":
                self._open_item(
                    {
                        "type": "message",
                        "id": f"msg_{self.id}_{len(self.output)}",
                        "role": "assistant",
                        "status": "in_progress",
                        "content": [],
                    }
                )
                part = {"type": "output_text", "text": "", "annotations": []}
                self._event(
                    "response.content_part.added",
                    item_id=self._open_id(),
                    output_index=len(self.output),
                    content_index=0,
                    part=part,
                )
            else:
                self._open_item(
                    {"type": "reasoning", "id": f"rs_{self.id}_{len(self.output)}", "summary": []}
                )
                self._event(
                    "response.reasoning_summary_part.added",
                    item_id=self._open_id(),
                    output_index=len(self.output),
                    summary_index=0,
                    part={"type": "summary_text", "text": ""},
                )
        assert self._open is not None
        self._open.setdefault("_text", "")
        self._open["_text"] += chunk.text
        name = (
            "response.output_text.delta"
            if kind == "message"
            else "response.reasoning_summary_text.delta"
        )
        index = {"content_index": 0} if kind == "message" else {"summary_index": 0}
        extra: dict[str, Any] = {"logprobs": []} if kind == "message" else {}
        self._event(
            name,
            item_id=self._open_id(),
            output_index=len(self.output),
            delta=chunk.text,
            **index,
            **extra,
        )

    def _open_id(self) -> str:
        assert self._open is not None
        return str(self._open["id"])

    def _open_item(self, item: dict[str, Any]) -> None:
        self._open = item
        self._event("response.output_item.added", output_index=len(self.output), item=item)

    def _close_item(self) -> None:
        item, self._open = self._open, None
        if item is None:
            return
        text = item.pop("_text", "")
        index = len(self.output)
        if item["type"] == "message":
            part = {"type": "output_text", "text": text, "annotations": []}
            self._event(
                "response.output_text.done",
                item_id=item["id"],
                output_index=index,
                content_index=0,
                text=text,
                logprobs=[],
            )
            self._event(
                "response.content_part.done",
                item_id=item["id"],
                output_index=index,
                content_index=0,
                part=part,
            )
            item["content"] = [part]
        elif item["type"] == "reasoning":
            summary = {"type": "summary_text", "text": text}
            self._event(
                "response.reasoning_summary_text.done",
                item_id=item["id"],
                output_index=index,
                summary_index=0,
                text=text,
            )
            self._event(
                "response.reasoning_summary_part.done",
                item_id=item["id"],
                output_index=index,
                summary_index=0,
                part=summary,
            )
            item["summary"] = [summary]
            if self.seal:
                item["encrypted_content"] = seal(item["id"])
        else:
            self._event(
                "response.function_call_arguments.done",
                item_id=item["id"],
                output_index=index,
                arguments=item["arguments"],
            )
        item["status"] = "completed" if item["type"] != "reasoning" else None
        if item["status"] is None:
            del item["status"]
        self.output.append(item)
        self._event("response.output_item.done", output_index=index, item=item)

    def _fail(self, step: ErrorStep) -> None:
        if step.status >= 500:
            self.status = "failed"
            self._error = {"code": "server_error", "message": step.message}
            self._event("response.failed", response=self.snapshot())
        else:
            code = _ERROR_TYPES.get(step.status, "invalid_request_error")
            self._event("error", code=code, message=step.message, param=None)
        self._end()


class _Tail(Response):
    """A connection's view of a running response: its events after `after` (all: None), as
    they come. `owner`: the connection that asked for it, whose drop ends a response that is
    not in background mode."""

    def __init__(self, running: _Running, *, after: int | None, owner: bool) -> None:
        super().__init__()
        self.running = running
        self.next = 0 if after is None else after + 1
        self.owner = owner

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = [
            (b"content-type", b"text/event-stream; charset=utf-8"),
            (b"cache-control", b"no-cache"),
        ]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        running = self.running
        watcher = asyncio.ensure_future(receive())
        try:
            while True:
                while self.next < len(running.events):
                    if self.next in running.drops:
                        running.drops.discard(self.next)
                        raise _ScriptedDisconnect
                    body = running.events[self.next]
                    self.next += 1
                    await send({"type": "http.response.body", "body": body, "more_body": True})
                if running.done:
                    break
                waiting = asyncio.ensure_future(running.wait(self.next))
                await asyncio.wait({waiting, watcher}, return_when=asyncio.FIRST_COMPLETED)
                if not waiting.done():
                    waiting.cancel()
                if watcher.done():
                    if _is_disconnect(watcher.result()):
                        if self.owner:
                            running.abandoned()
                        return
                    watcher = asyncio.ensure_future(receive())
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        except _ScriptedDisconnect:
            if self.owner:
                running.abandoned()
            raise
        finally:
            if not watcher.done():
                watcher.cancel()


def usage_json(usage: Usage) -> dict[str, Any]:
    """`usage` as the Responses API reports it."""
    return {
        "input_tokens": usage.input_tokens,
        "input_tokens_details": {
            "cached_tokens": usage.cached_input_tokens,
            "cache_write_tokens": usage.cache_write_tokens,
        },
        "output_tokens": usage.output_tokens,
        "output_tokens_details": {"reasoning_tokens": usage.reasoning_tokens},
        "total_tokens": usage.total_tokens,
    }
