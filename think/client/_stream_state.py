"""A turn's stream apart from its I/O: where it stands, what to request next to go on from
there, and what each event it reads comes to. `AsyncTurnStream` (`_async.py`) opens and reads
the connections; every rule of resuming across them is here."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import httpx

from think.client._errors import ThinkAPIError, ThinkStreamError
from think.client._models import StreamChunk, Turn
from think.client._requests import (
    RETRY_STATUSES,
    RETRYABLE_ERRORS,
    Backoff,
    Request,
    Submission,
    get_turn,
    submit,
    turn_path,
)
from think.client._sse import SSEEvent

STREAM_READ_TIMEOUT = 45.0
"""Silence after which a stream counts as dropped: three of the gateway's 15 s keep-alives."""
TURN_ID_HEADER = "x-think-turn-id"
"""Read from a `mode: "stream"` answer if a gateway names the turn there (docs/api.md does not
promise it; without it the turn is found again through its Idempotency-Key)."""
ENDED_EARLY = "the stream ended before its [DONE]"


class _Done:
    pass


DONE = _Done()
"""What `StreamState.take` answers for the stream's last event, `[DONE]`."""


@dataclass(kw_only=True, eq=False)
class StreamState:
    """Where a turn's stream stands, and what to request next to go on from there.

    The first request of `stream()` is the submission itself (`mode: "stream"`), which always
    carries an Idempotency-Key; if it drops before the stream ends, the same submission is sent
    again with `mode: "submit"`, which answers the turn that key already made (or admits it, if
    the first request never arrived), and the stream resumes from its turn id. Chunks already
    seen are never passed on twice, even if a gateway sent them again.
    """

    agent: str
    cid: str
    backoff: Backoff
    submission: Submission | None = None
    """`stream()`'s submission; None for `stream_turn()`, which names its turn."""
    turn_id: str | None = None
    last_event_id: int | None = None
    """The id of the last chunk passed on: the next connection asks for what follows it."""
    reconnects: int = field(default=0, init=False)
    failures: int = field(default=0, init=False)
    """Connections broken in a row without a new chunk: what `backoff` counts."""
    progressed: bool = field(default=False, init=False)
    """The current connection has brought a new chunk."""

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
