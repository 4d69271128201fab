"""The gateway's endpoints as request descriptions: the client's rules, apart from its I/O.

Each function returns a `Request`: method, path, body, headers, whether it is safe to send
again after a dropped connection, and how to read the answer; `Connection` is how to reach the
gateway, and `_stream_state.StreamState` a stream's resume logic. `AsyncThinkClient` only sends
them (and `ThinkClient` runs it), so the contract is written once.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypedDict, TypeVar
from urllib.parse import quote

import httpx

from think._messages import UIMessage
from think.client._errors import ThinkConnectionError
from think.client._models import (
    Agent,
    ClientTool,
    Conversation,
    Message,
    SearchHit,
    Turn,
    WorkspaceFile,
    new_idempotency_key,
)

T = TypeVar("T")

TurnInput = str | UIMessage | Mapping[str, Any] | Sequence[UIMessage | Mapping[str, Any]]
"""A turn's input: text, one UIMessage (a model or its JSON), or several."""
ClientToolSpec = ClientTool | Mapping[str, Any]

DEFAULT_URL = "http://127.0.0.1:8000"
"""Where `think dev` serves the API."""
DEFAULT_WAIT = 600.0
"""The gateway's own bound on a wait-mode request without `wait_timeout`."""
WAIT_MARGIN = 30.0
RETRY_STATUSES = frozenset({502, 503, 504})
"""Answers that mean "not now": a retry can only help (503 is what the gateway says when
Postgres or Temporal is briefly away)."""
RETRYABLE_ERRORS: tuple[type[Exception], ...] = (
    httpx.TimeoutException,
    httpx.NetworkError,
    httpx.RemoteProtocolError,
)
"""Connection failures after which the request may or may not have been handled."""
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


@dataclass(frozen=True)
class Connection:
    """How to reach one gateway: what a client's constructor arguments come to, for both of its
    faces (`AsyncThinkClient`, and `ThinkClient` over it)."""

    base_url: str
    headers: dict[str, str]
    """Sent with every request: `Accept: application/json`, the API key as a bearer token, and
    the caller's own."""
    timeout: httpx.Timeout
    backoff: Backoff

    @classmethod
    def of(
        cls,
        base_url: str,
        api_key: str | None,
        timeout: float | httpx.Timeout,
        max_retries: int,
        headers: Mapping[str, str] | None,
    ) -> Connection:
        all_headers = {"Accept": "application/json", **(headers or {})}
        if api_key:
            all_headers["Authorization"] = f"Bearer {api_key}"
        return cls(
            base_url=base_url.rstrip("/"),
            headers=all_headers,
            timeout=timeout if isinstance(timeout, httpx.Timeout) else httpx.Timeout(timeout),
            backoff=Backoff(max_retries),
        )


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


class SubmitOptions(TypedDict, total=False):
    """What a turn's submission (`submit`, `wait`, `stream`) takes besides its input, by
    keyword; every one may be left out (docs/api.md, "Turns")."""

    idempotency_key: str | None
    """Sent as `Idempotency-Key` (see `new_idempotency_key()`): the same key answers the turn it
    already made, so the request is safe to send again after a dropped connection."""
    parent_id: str | None
    """The message to branch from; by default the conversation's active leaf."""
    body: Mapping[str, Any] | None
    """Per-turn data, handed to the agent's `before_turn` as `ctx.body`."""
    client_tools: Sequence[ClientToolSpec] | None
    """Tools the caller runs itself, for this turn: see `ClientTool`."""


@dataclass(frozen=True)
class Submission:
    """A turn's request body and key: kept by a stream, which may need to send it again.

    Its fields after `input` are `SubmitOptions`, so `Submission(agent, cid, input, **options)`."""

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

    def keyed(self) -> Submission:
        """This submission with an Idempotency-Key: its own, or a fresh one."""
        if self.idempotency_key:
            return self
        return dataclasses.replace(self, idempotency_key=new_idempotency_key())


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


def steer(agent: str, cid: str, turn_id: str, input: TurnInput) -> Request[Turn]:
    # Not retried: a repeat would deliver the words twice.
    body = {"input": encode_input(input)}
    return Request("POST", f"{turn_path(agent, cid, turn_id)}/steer", _turn, json=body)


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


def unreachable(request: Request[Any], base_url: str, error: Exception) -> ThinkConnectionError:
    """The error for a request that could not be completed (after its retries, if any)."""
    why = str(error) or type(error).__name__
    tries = " (retried)" if request.retry else ""
    return ThinkConnectionError(f"{request.method} {base_url}{request.path}{tries}: {why}")
