"""The gateway's endpoints as request descriptions: the client's rules, apart from its I/O.

Each function returns a `Request`: method, path, body, headers, whether it is safe to send
again after a dropped connection, and how to read the answer; `StreamState` is a stream's
resume logic. `AsyncThinkClient` only sends them (and `ThinkClient` runs it), so the contract
is written once.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar
from urllib.parse import quote

import httpx

from think._messages import UIMessage
from think.client._errors import ThinkAPIError, ThinkConnectionError, ThinkStreamError
from think.client._models import (
    Agent,
    ClientTool,
    Conversation,
    Message,
    SearchHit,
    StreamChunk,
    Turn,
    WorkspaceFile,
)
from think.client._sse import SSEEvent

T = TypeVar("T")

TurnInput = str | UIMessage | Mapping[str, Any] | Sequence[UIMessage | Mapping[str, Any]]
"""A turn's input: text, one UIMessage (a model or its JSON), or several."""
ClientToolSpec = ClientTool | Mapping[str, Any]

DEFAULT_URL = "http://127.0.0.1:8000"
"""Where `think dev` serves the API."""
DEFAULT_WAIT = 600.0
"""The gateway's own bound on a wait-mode request without `wait_timeout`."""
WAIT_MARGIN = 30.0
STREAM_READ_TIMEOUT = 45.0
"""Silence after which a stream counts as dropped: three of the gateway's 15 s keep-alives."""
RETRY_STATUSES = frozenset({502, 503, 504})
"""Answers that mean "not now": a retry can only help (503 is what the gateway says when
Postgres or Temporal is briefly away)."""
RETRYABLE_ERRORS: tuple[type[Exception], ...] = (
    httpx.TimeoutException,
    httpx.NetworkError,
    httpx.RemoteProtocolError,
)
"""Connection failures after which the request may or may not have been handled."""
TURN_ID_HEADER = "x-think-turn-id"
"""Read from a `mode: "stream"` answer if a gateway names the turn there (API.md does not
promise it; without it the turn is found again through its Idempotency-Key)."""
_NO_BODY: Any = object()
MISSING: Any = object()
"""`submit_tool_result`'s default output: None is an output like any other."""


@dataclass(frozen=True)
class Request(Generic[T]):
    method: str
    path: str
    parse: Callable[[httpx.Response], T]
    json: Any = _NO_BODY
    params: dict[str, Any] | None = None
    headers: dict[str, str] = field(default_factory=dict)
    retry: bool = False
    """Safe to send again when the connection drops: a read, or a write the gateway
    deduplicates (an Idempotency-Key, a cancel)."""
    read_timeout: float | None = None
    """Overrides the client's read timeout (wait mode waits for the whole turn)."""

    def send_kwargs(self, timeout: httpx.Timeout) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"params": self.params, "headers": self.headers}
        if self.json is not _NO_BODY:
            kwargs["json"] = self.json
        if self.read_timeout is not None:
            kwargs["timeout"] = httpx.Timeout(
                connect=timeout.connect,
                read=self.read_timeout,
                write=timeout.write,
                pool=timeout.pool,
            )
        return kwargs


class Backoff:
    """Delays between attempts: 0.25 s doubling to 4 s, or the gateway's Retry-After."""

    def __init__(self, max_retries: int) -> None:
        self.max_retries = max_retries

    def delay(self, attempt: int, retry_after: float | None = None) -> float | None:
        """Seconds to wait before retry number `attempt` (1-based), or None: give up."""
        if attempt > self.max_retries:
            return None
        delay = min(4.0, 0.25 * 2.0 ** (attempt - 1))
        if retry_after is not None:
            delay = max(delay, min(retry_after, 30.0))
        return delay


# --------------------------------------------------------------------------- reading answers


def _none(response: httpx.Response) -> None:
    return None


def _turn(response: httpx.Response) -> Turn:
    return Turn.model_validate(response.json())


def _conversation(response: httpx.Response) -> Conversation:
    return Conversation.model_validate(response.json())


def _agents(response: httpx.Response) -> list[Agent]:
    return [Agent.model_validate(a) for a in response.json()["agents"]]


def _messages(response: httpx.Response) -> list[Message]:
    return [Message.model_validate(m) for m in response.json()["messages"]]


def _turns(response: httpx.Response) -> list[Turn]:
    return [Turn.model_validate(t) for t in response.json()["turns"]]


def _hits(response: httpx.Response) -> list[SearchHit]:
    return [SearchHit.model_validate(h) for h in response.json()["hits"]]


def _workspace_files(response: httpx.Response) -> list[WorkspaceFile]:
    return [WorkspaceFile.model_validate(f) for f in response.json()["files"]]


def _content(response: httpx.Response) -> bytes:
    return response.content


# --------------------------------------------------------------------------- paths and bodies


def _seg(value: str) -> str:
    return quote(value, safe="")


def conversation_path(agent: str, cid: str) -> str:
    return f"/v1/agents/{_seg(agent)}/conversations/{_seg(cid)}"


def turn_path(agent: str, cid: str, turn_id: str) -> str:
    return f"{conversation_path(agent, cid)}/turns/{_seg(turn_id)}"


def _message(value: UIMessage | Mapping[str, Any]) -> dict[str, Any]:
    return value.wire() if isinstance(value, UIMessage) else dict(value)


def encode_input(value: TurnInput) -> Any:
    if isinstance(value, str):
        return value
    if isinstance(value, UIMessage | Mapping):
        return _message(value)
    return [_message(m) for m in value]


def _client_tool(value: ClientToolSpec) -> dict[str, Any]:
    return value.model_dump() if isinstance(value, ClientTool) else dict(value)


@dataclass(frozen=True)
class Submission:
    """A turn's request body and key: kept by a stream, which may need to send it again."""

    agent: str
    cid: str
    input: TurnInput
    idempotency_key: str | None = None
    parent_id: str | None = None
    body: Mapping[str, Any] | None = None
    client_tools: Sequence[ClientToolSpec] | None = None

    def payload(self, mode: Literal["submit", "wait", "stream"]) -> dict[str, Any]:
        payload: dict[str, Any] = {"input": encode_input(self.input), "mode": mode}
        if self.parent_id is not None:
            payload["parent_id"] = self.parent_id
        if self.body is not None:
            payload["body"] = dict(self.body)
        if self.client_tools:
            payload["client_tools"] = [_client_tool(t) for t in self.client_tools]
        return payload

    def headers(self) -> dict[str, str]:
        return {"Idempotency-Key": self.idempotency_key} if self.idempotency_key else {}

    @property
    def path(self) -> str:
        return f"{conversation_path(self.agent, self.cid)}/turns"


# --------------------------------------------------------------------------- the endpoints


def agents() -> Request[list[Agent]]:
    return Request("GET", "/v1/agents", _agents, retry=True)


def create_conversation(
    agent: str, id: str | None, metadata: Mapping[str, Any] | None
) -> Request[Conversation]:
    body: dict[str, Any] = {}
    if id is not None:
        body["id"] = id
    if metadata is not None:
        body["metadata"] = dict(metadata)
    # With an id, creating again answers the same conversation: safe to retry.
    return Request(
        "POST", f"/v1/agents/{_seg(agent)}/conversations", _conversation, json=body, retry=bool(id)
    )


def get_conversation(agent: str, cid: str) -> Request[Conversation]:
    return Request("GET", conversation_path(agent, cid), _conversation, retry=True)


def messages(agent: str, cid: str, leaf_id: str | None) -> Request[list[Message]]:
    params = {"leaf_id": leaf_id} if leaf_id is not None else None
    return Request(
        "GET", f"{conversation_path(agent, cid)}/messages", _messages, params=params, retry=True
    )


def add_messages(
    agent: str,
    cid: str,
    messages: Sequence[UIMessage | Mapping[str, Any]],
    parent_id: str | None,
) -> Request[None]:
    encoded = [_message(m) for m in messages]
    body: dict[str, Any] = {"messages": encoded}
    if parent_id is not None:
        body["parent_id"] = parent_id
    # Idempotent by message id, so safe to retry when every message names its id.
    retry = all("id" in m for m in encoded)
    return Request(
        "POST", f"{conversation_path(agent, cid)}/messages", _none, json=body, retry=retry
    )


def search(agent: str, cid: str, q: str, limit: int | None) -> Request[list[SearchHit]]:
    params: dict[str, Any] = {"q": q}
    if limit is not None:
        params["limit"] = limit
    return Request(
        "GET", f"{conversation_path(agent, cid)}/search", _hits, params=params, retry=True
    )


def workspace_files(agent: str, cid: str, prefix: str | None) -> Request[list[WorkspaceFile]]:
    params = {"prefix": prefix} if prefix else None
    return Request(
        "GET",
        f"{conversation_path(agent, cid)}/workspace",
        _workspace_files,
        params=params,
        retry=True,
    )


def read_workspace_file(agent: str, cid: str, path: str) -> Request[bytes]:
    # `/workspace/...` (how eviction markers and fetched files name a file) is the root.
    relative = path[len("/workspace/") :] if path.startswith("/workspace/") else path
    encoded = quote(relative.lstrip("/"), safe="/")
    return Request(
        "GET", f"{conversation_path(agent, cid)}/workspace/{encoded}", _content, retry=True
    )


def submit(submission: Submission) -> Request[Turn]:
    return Request(
        "POST",
        submission.path,
        _turn,
        json=submission.payload("submit"),
        headers=submission.headers(),
        retry=submission.idempotency_key is not None,
    )


def wait(submission: Submission, wait_timeout: float | None) -> Request[Turn]:
    payload = submission.payload("wait")
    if wait_timeout is not None:
        payload["wait_timeout"] = wait_timeout
    return Request(
        "POST",
        submission.path,
        _turn,
        json=payload,
        headers=submission.headers(),
        retry=submission.idempotency_key is not None,
        read_timeout=(wait_timeout or DEFAULT_WAIT) + WAIT_MARGIN,
    )


def get_turn(agent: str, cid: str, turn_id: str) -> Request[Turn]:
    return Request("GET", turn_path(agent, cid, turn_id), _turn, retry=True)


def list_turns(agent: str, cid: str, status: str | Sequence[str] | None) -> Request[list[Turn]]:
    params = None
    if status is not None:
        params = {"status": [status] if isinstance(status, str) else list(status)}
    return Request(
        "GET", f"{conversation_path(agent, cid)}/turns", _turns, params=params, retry=True
    )


def cancel(agent: str, cid: str, turn_id: str, reason: str | None) -> Request[Turn]:
    # A second cancel changes nothing (200, unchanged): safe to retry.
    body = {"reason": reason} if reason is not None else _NO_BODY
    return Request("POST", f"{turn_path(agent, cid, turn_id)}/cancel", _turn, json=body, retry=True)


def approve(
    agent: str, cid: str, turn_id: str, approval_id: str, approved: bool, reason: str | None
) -> Request[Turn]:
    body: dict[str, Any] = {"approved": approved}
    if reason is not None:
        body["reason"] = reason
    # Not retried: a repeat would answer 409 "already decided" for a decision that stood.
    path = f"{turn_path(agent, cid, turn_id)}/approvals/{_seg(approval_id)}"
    return Request("POST", path, _turn, json=body)


def submit_tool_result(
    agent: str, cid: str, turn_id: str, tool_call_id: str, output: Any, error: str | None
) -> Request[Turn]:
    if (output is MISSING) == (error is None):
        raise TypeError("submit_tool_result takes either output= or error=, and not both")
    body = {"error": error} if error is not None else {"output": output}
    path = f"{turn_path(agent, cid, turn_id)}/tool-results/{_seg(tool_call_id)}"
    # Not retried: a repeat would answer 409 "already answered" for a result that stood.
    return Request("POST", path, _turn, json=body)


def regenerate(agent: str, cid: str, message_id: str) -> Request[Turn]:
    path = f"{conversation_path(agent, cid)}/regenerate"
    return Request("POST", path, _turn, json={"message_id": message_id})


# --------------------------------------------------------------------------- streams


class _Done:
    pass


DONE = _Done()


class StreamState:
    """Where a turn's stream stands, and what to request next to go on from there.

    The first request of `stream()` is the submission itself (`mode: "stream"`), which always
    carries an Idempotency-Key; if it drops before the stream ends, the same submission is sent
    again with `mode: "submit"`, which answers the turn that key already made (or admits it, if
    the first request never arrived), and the stream resumes from its turn id. Chunks already
    seen are never passed on twice, even if a gateway sent them again.
    """

    def __init__(
        self,
        *,
        submission: Submission | None,
        agent: str,
        cid: str,
        turn_id: str | None,
        last_event_id: int | None,
        backoff: Backoff,
    ) -> None:
        self.submission = submission
        self.agent = agent
        self.cid = cid
        self.turn_id = turn_id
        self.last_event_id = last_event_id
        self.backoff = backoff
        self.reconnects = 0
        self.failures = 0
        self.progressed = False
        self.done = False

    @property
    def needs_turn_id(self) -> bool:
        """The submission was sent but its turn id is unknown: find the turn by its key."""
        return self.turn_id is None and self.reconnects > 0

    def turn_request(self) -> Request[Turn]:
        """The request that answers the turn as it stands: by id, or by the submission's key."""
        if self.turn_id is not None:
            return get_turn(self.agent, self.cid, self.turn_id)
        return self.resolve_request()

    def resolve_request(self) -> Request[Turn]:
        """The submission again, as `mode: "submit"`: answers the turn its key made. Sent once
        per reconnect; the stream's own backoff does the retrying."""
        assert self.submission is not None
        return submit(self.submission)

    def open_kwargs(self, timeout: httpx.Timeout) -> tuple[str, str, dict[str, Any]]:
        """The method, path and httpx arguments of the next stream request."""
        stream_timeout = httpx.Timeout(
            connect=timeout.connect,
            read=max(STREAM_READ_TIMEOUT, timeout.read or 0.0),
            write=timeout.write,
            pool=timeout.pool,
        )
        self.progressed = False
        if self.turn_id is None:
            assert self.submission is not None
            return (
                "POST",
                self.submission.path,
                {
                    "json": self.submission.payload("stream"),
                    "headers": self.submission.headers(),
                    "timeout": stream_timeout,
                },
            )
        headers = {"Accept": "text/event-stream"}
        if self.last_event_id is not None:
            headers["Last-Event-ID"] = str(self.last_event_id)
        path = f"{turn_path(self.agent, self.cid, self.turn_id)}/stream"
        return "GET", path, {"headers": headers, "timeout": stream_timeout}

    def opened(self, response: httpx.Response) -> None:
        """Check a stream's answer (its body read if it is an error)."""
        if response.status_code >= 400:
            raise ThinkAPIError.from_response(response)
        if self.turn_id is None:
            self.turn_id = response.headers.get(TURN_ID_HEADER) or None

    def take(self, event: SSEEvent) -> StreamChunk | _Done | None:
        """What to hand the caller for one event: a chunk, DONE, or nothing (a repeat)."""
        if event.data == "[DONE]":
            self.done = True
            return DONE
        event_id: int | None = None
        if event.id is not None:
            try:
                event_id = int(event.id)
            except ValueError:
                raise ThinkStreamError(
                    f"a stream event has a non-numeric id {event.id!r}"
                ) from None
            if self.last_event_id is not None and event_id <= self.last_event_id:
                return None
        try:
            chunk = json.loads(event.data)
        except json.JSONDecodeError as error:
            raise ThinkStreamError(
                f"stream event {event.id!r} is not JSON: {event.data[:200]!r}"
            ) from error
        if not isinstance(chunk, dict):
            raise ThinkStreamError(f"stream event {event.id!r} is not a JSON object")
        if event_id is not None:
            self.last_event_id = event_id
        self.progressed = True
        return StreamChunk(chunk, event_id)

    def retry_delay(self, error: BaseException | str) -> float:
        """After a broken stream: seconds to wait before reconnecting, or ThinkStreamError."""
        if self.progressed:
            self.failures = 0  # a reconnect that made progress starts the count again
        self.failures += 1
        retry_after = error.retry_after if isinstance(error, ThinkAPIError) else None
        delay = self.backoff.delay(self.failures, retry_after)
        if delay is None:
            where = f"turn {self.turn_id!r}" if self.turn_id else "the turn's stream"
            after = f" after event {self.last_event_id}" if self.last_event_id is not None else ""
            raise ThinkStreamError(
                f"lost {where}{after} and could not resume it in "
                f"{self.backoff.max_retries} attempts: {error}"
            ) from (error if isinstance(error, BaseException) else None)
        self.reconnects += 1
        return delay

    def retryable(self, error: BaseException) -> bool:
        if isinstance(error, ThinkAPIError):
            return error.status in RETRY_STATUSES
        return isinstance(error, RETRYABLE_ERRORS)


ENDED_EARLY = "the stream ended before its [DONE]"


def unreachable(request: Request[Any], base_url: str, error: Exception) -> ThinkConnectionError:
    """The error for a request that could not be completed (after its retries, if any)."""
    why = str(error) or type(error).__name__
    tries = " (retried)" if request.retry else ""
    return ThinkConnectionError(f"{request.method} {base_url}{request.path}{tries}: {why}")
