"""`AsyncThinkClient`: the gateway's HTTP API (API.md), and the client's one implementation.

Everything that sends lives here: retries, and a stream's reconnect-and-resume loop. The
blocking `ThinkClient` (`_sync.py`) runs this same code on a private event loop, so what is
written here is what both faces do; the rules that need no I/O are in `_requests.py` and
`_stream_state.py`.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator, Mapping, Sequence
from typing import Any, Self, TypeVar, Unpack

import httpx

from think._messages import UIMessage
from think.client import _requests as r
from think.client._errors import ThinkAPIError
from think.client._models import (
    Agent,
    Conversation,
    Message,
    SearchHit,
    StreamChunk,
    Turn,
    WorkspaceFile,
)
from think.client._sse import SSEDecoder
from think.client._stream_state import DONE, ENDED_EARLY, StreamState

T = TypeVar("T")


class _AsyncClosing:
    """`async with it:` closes it on the way out, error or not."""

    async def aclose(self) -> None:
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


class _Client:
    """How both faces of the client are made: the constructor's arguments, written once, come
    to a `Connection`, from which each face opens what it needs (`_open`)."""

    def __init__(
        self,
        base_url: str = r.DEFAULT_URL,
        api_key: str | None = None,
        timeout: float | httpx.Timeout = 30.0,
        *,
        max_retries: int = 5,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self._open(r.Connection.of(base_url, api_key, timeout, max_retries, headers))

    def _open(self, connection: r.Connection) -> None:
        raise NotImplementedError


class _StreamPosition:
    """Where a turn's stream stands: what both of its faces, `AsyncTurnStream` and the blocking
    `TurnStream`, read from the one `StreamState` they share."""

    _state: StreamState

    @property
    def turn_id(self) -> str | None:
        """The turn's id; for `stream()`, known once `get_turn()` or a reconnect looked it up."""
        return self._state.turn_id

    @property
    def last_event_id(self) -> int | None:
        """The id of the last chunk passed on: where a later `stream_turn` would resume."""
        return self._state.last_event_id

    @property
    def reconnects(self) -> int:
        """How many times the stream had to be opened again."""
        return self._state.reconnects

    @property
    def idempotency_key(self) -> str | None:
        """The submission's key (`stream()` only): the turn can be found again by it."""
        submission = self._state.submission
        return submission.idempotency_key if submission else None


class AsyncThinkClient(_Client, _AsyncClosing):
    """A client of one Think gateway. Use it as an async context manager, or `aclose()` it.

    Reads, cancels and submissions that carry an Idempotency-Key are sent again after a
    dropped connection or a 502/503/504 (up to `max_retries` times, backing off); anything
    else fails at once with `ThinkConnectionError`. Every 4xx/5xx answer raises
    `ThinkAPIError` (`NotFoundError`, `ConflictError`, `InvalidRequestError`, …).
    """

    @classmethod
    def _over(cls, connection: r.Connection) -> Self:
        """A client of `connection`: how `ThinkClient` makes its async twin from the arguments
        it was given."""
        client = cls.__new__(cls)
        client._open(connection)
        return client

    def _open(self, connection: r.Connection) -> None:
        self._connection = connection
        self._http = httpx.AsyncClient(
            base_url=connection.base_url, headers=connection.headers, timeout=connection.timeout
        )

    @property
    def base_url(self) -> str:
        return str(self._http.base_url).rstrip("/")

    async def aclose(self) -> None:
        await self._http.aclose()

    # --- agents and conversations

    async def agents(self) -> list[Agent]:
        """The agents this gateway hosts."""
        return await self._send(r.agents())

    async def create_conversation(
        self, agent: str, id: str | None = None, metadata: Mapping[str, Any] | None = None
    ) -> Conversation:
        """A new conversation (a fresh id unless `id` is given); an existing `id` answers the
        conversation as it is."""
        return await self._send(r.create_conversation(agent, id, metadata))

    async def get_conversation(self, agent: str, cid: str) -> Conversation:
        return await self._send(r.get_conversation(agent, cid))

    async def messages(self, agent: str, cid: str, leaf_id: str | None = None) -> list[Message]:
        """The active path of the conversation (or the path to `leaf_id`), oldest first."""
        return await self._send(r.messages(agent, cid, leaf_id))

    async def add_messages(
        self,
        agent: str,
        cid: str,
        messages: Sequence[UIMessage | Mapping[str, Any]],
        parent_id: str | None = None,
    ) -> None:
        """Append messages without a model turn (idempotent by message id)."""
        await self._send(r.add_messages(agent, cid, messages, parent_id))

    async def workspace_files(
        self, agent: str, cid: str, prefix: str | None = None
    ) -> list[WorkspaceFile]:
        """The files of the conversation's workspace (under the directory `prefix`)."""
        return await self._send(r.workspace_files(agent, cid, prefix))

    async def read_workspace_file(self, agent: str, cid: str, path: str) -> bytes:
        """A file of the conversation's workspace, as bytes (`NotFoundError` when absent)."""
        return await self._send(r.read_workspace_file(agent, cid, path))

    async def search(
        self, agent: str, cid: str, q: str, limit: int | None = None
    ) -> list[SearchHit]:
        """Full-text search over the conversation's messages, best first."""
        return await self._send(r.search(agent, cid, q, limit))

    # --- turns (a submission's options are `SubmitOptions`, by keyword: idempotency_key,
    # parent_id, body and client_tools, each optional)

    async def submit(
        self, agent: str, cid: str, input: r.TurnInput, **options: Unpack[r.SubmitOptions]
    ) -> Turn:
        """Submit a turn; answers once it is durably accepted, before any model work.

        With an `idempotency_key` (see `new_idempotency_key()`), a dropped connection is
        retried safely: the turn runs once, and a retry answers it with `accepted` False.
        """
        submission = r.Submission(agent, cid, input, **options)
        return await self._send(r.submit(submission))

    async def wait(
        self,
        agent: str,
        cid: str,
        input: r.TurnInput,
        *,
        wait_timeout: float | None = None,
        **options: Unpack[r.SubmitOptions],
    ) -> Turn:
        """Submit a turn and answer once it has ended or paused for a person, with its message;
        after `wait_timeout` seconds, the turn as it stands."""
        submission = r.Submission(agent, cid, input, **options)
        return await self._send(r.wait(submission, wait_timeout))

    def stream(
        self, agent: str, cid: str, input: r.TurnInput, **options: Unpack[r.SubmitOptions]
    ) -> AsyncTurnStream:
        """Submit a turn and stream its chunks (`async for chunk in client.stream(...)`).

        One request (`mode: "stream"`), always with an Idempotency-Key (a fresh one unless
        given), so a dropped connection is resumed without a second turn: see `AsyncTurnStream`.
        """
        submission = r.Submission(agent, cid, input, **options).keyed()
        backoff = self._connection.backoff
        return AsyncTurnStream(
            self, StreamState(agent=agent, cid=cid, backoff=backoff, submission=submission)
        )

    def stream_turn(
        self, agent: str, cid: str, turn_id: str, last_event_id: int | None = None
    ) -> AsyncTurnStream:
        """Stream a turn's chunks: from its first, or from the one after `last_event_id`."""
        state = StreamState(
            agent=agent,
            cid=cid,
            backoff=self._connection.backoff,
            turn_id=turn_id,
            last_event_id=last_event_id,
        )
        return AsyncTurnStream(self, state)

    async def get_turn(self, agent: str, cid: str, turn_id: str) -> Turn:
        return await self._send(r.get_turn(agent, cid, turn_id))

    async def list_turns(
        self, agent: str, cid: str, status: str | Sequence[str] | None = None
    ) -> list[Turn]:
        """The conversation's turns, newest first; only those in `status` if given."""
        return await self._send(r.list_turns(agent, cid, status))

    async def cancel(self, agent: str, cid: str, turn_id: str, reason: str | None = None) -> Turn:
        """Cancel a turn: a queued one never starts, a running one stops within about a second
        and keeps its partial answer; an ended one is left as it is. Answers the turn."""
        return await self._send(r.cancel(agent, cid, turn_id, reason))

    async def steer_turn(self, agent: str, cid: str, turn_id: str, input: r.TurnInput) -> Turn:
        """Send the user's words to a running turn: each message joins its answer at the next
        step boundary (a `steering-message` in its stream). `ThinkAPIError` 409 when the turn
        has ended: submit the words as a new turn then. Answers the turn."""
        return await self._send(r.steer(agent, cid, turn_id, input))

    async def approve(
        self,
        agent: str,
        cid: str,
        turn_id: str,
        approval_id: str,
        approved: bool,
        reason: str | None = None,
    ) -> Turn:
        """Decide a pending approval (`tool-approval-request` chunk, or `pending_approvals`);
        the paused turn then goes on, and so does its stream. Answers the turn."""
        return await self._send(r.approve(agent, cid, turn_id, approval_id, approved, reason))

    async def submit_tool_result(
        self,
        agent: str,
        cid: str,
        turn_id: str,
        tool_call_id: str,
        output: Any = r.MISSING,
        error: str | None = None,
    ) -> Turn:
        """Answer a client tool's call (`pending_client_tools`) with its `output`, or with
        `error`; the turn goes on once every call of its step has an answer. Answers the turn."""
        return await self._send(
            r.submit_tool_result(agent, cid, turn_id, tool_call_id, output, error)
        )

    async def regenerate(self, agent: str, cid: str, message_id: str) -> Turn:
        """A new answer to the message before assistant message `message_id`, on a sibling
        branch (the old answer is kept)."""
        return await self._send(r.regenerate(agent, cid, message_id))

    # --- sending

    async def _send(self, request: r.Request[T]) -> T:
        backoff = self._connection.backoff
        attempt = 0
        while True:
            attempt += 1
            try:
                return await self._send_once(request)
            except r.RETRYABLE_ERRORS as error:
                delay = backoff.delay(attempt) if request.retry else None
                if delay is None:
                    raise r.unreachable(request, self.base_url, error) from error
            except ThinkAPIError as failure:
                retry = request.retry and failure.status in r.RETRY_STATUSES
                delay = backoff.delay(attempt, failure.retry_after) if retry else None
                if delay is None:
                    raise
            await asyncio.sleep(delay)

    async def _send_once(self, request: r.Request[T]) -> T:
        response = await self._http.request(
            request.method, request.path, **request.send_kwargs(self._connection.timeout)
        )
        if response.status_code >= 400:
            raise ThinkAPIError.from_response(response)
        return request.parse(response)


class AsyncTurnStream(_StreamPosition, _AsyncClosing):
    """A turn's chunks, each once and in order, across dropped connections.

    Iterate it (`async for chunk in stream`) to get `StreamChunk`s: the AI SDK UIMessageChunk
    dicts, each with its `event_id`. When the connection drops (or the stream ends without
    `[DONE]`, or falls silent past three keep-alives), it reconnects with `Last-Event-ID`,
    backing off, and gives up with `ThinkStreamError` after `max_retries` attempts that brought
    nothing new. To stop early, leave an `async with stream:` block or call `aclose()`: that
    closes the connection at once (an abandoned iterator holds it until it is collected).
    """

    def __init__(self, client: AsyncThinkClient, state: StreamState) -> None:
        """The stream of `state`'s turn, as `client.stream()` and `stream_turn()` make it."""
        self._client = client
        self._state = state
        self._iterator: AsyncGenerator[StreamChunk, None] | None = None

    async def get_turn(self) -> Turn:
        """The turn as it stands, e.g. to answer its `pending_approvals`. For `stream()`, whose
        single request does not name the turn, the first call finds it by its Idempotency-Key
        (the submission sent again, which the gateway answers with the same turn)."""
        turn = await self._client._send(self._state.turn_request())
        self._state.turn_id = turn.turn_id
        return turn

    def __aiter__(self) -> AsyncIterator[StreamChunk]:
        if self._iterator is None:
            self._iterator = self._chunks()
        return self._iterator

    async def aclose(self) -> None:
        if self._iterator is not None:
            await self._iterator.aclose()

    async def _chunks(self) -> AsyncGenerator[StreamChunk, None]:
        state, client = self._state, self._client
        while True:
            failure: BaseException | str = ENDED_EARLY
            try:
                if state.needs_turn_id:
                    state.turn_id = (await client._send_once(state.resolve_request())).turn_id
                method, path, kwargs = state.open_kwargs(client._connection.timeout)
                async with client._http.stream(method, path, **kwargs) as response:
                    if response.status_code >= 400:
                        await response.aread()
                    state.opened(response)
                    decoder = SSEDecoder()
                    async for data in response.aiter_bytes():
                        for event in decoder.feed(data):
                            chunk = state.take(event)
                            if isinstance(chunk, StreamChunk):
                                yield chunk
                            elif chunk is DONE:
                                return
            except ThinkAPIError as error:
                if not state.retryable(error):
                    raise
                failure = error
            except r.RETRYABLE_ERRORS as error:
                failure = error
            await asyncio.sleep(state.retry_delay(failure))
