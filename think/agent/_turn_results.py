"""What the Python turn API answers: a turn's result, a submission record, and the callback
`chat()` drives. Both answers are built from the one turn view (`think.turns.turn_view`);
they live with the agent, whose turn API (`TurnAPI`) answers them."""

from __future__ import annotations

from collections.abc import Awaitable
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict

from think._messages import UIMessage
from think._protocol import UIMessageChunk
from think.storage import TERMINAL_STATUSES, TurnStatus


class QueuedBehind(BaseModel):
    """The turn a waited-for turn cannot start before: one paused for a person (its approval
    or client tool result). HTTP's wait mode names it the same way (`Turn.queued_behind`)."""

    model_config = ConfigDict(frozen=True)

    turn_id: str
    status: TurnStatus
    """`awaiting_approval` or `awaiting_client_tool`."""


class TurnResult(BaseModel):
    """How a turn ended (or, with a `wait_timeout`, where it stands).

    `status` is `completed`, `error`, `aborted` (cancelled; the partial answer is kept),
    `interrupted` (model recovery spent; the agent's terminal message is the answer) or
    `skipped` (never ran: superseded by a newer submission, merged into another turn named by
    `answered_by`, or a continuation with nothing to continue); or, like HTTP wait mode,
    `awaiting_approval` / `awaiting_client_tool` when the turn paused for a person or a client.
    """

    model_config = ConfigDict(frozen=True)

    turn_id: str
    status: TurnStatus
    message: UIMessage | None = None
    """The assistant message (None when the turn produced none)."""
    output: Any = None
    """The validated structured output, for a turn that asked for one."""
    error: str | None = None
    """Why the turn did not complete: the error, the cancel reason, why it was skipped."""
    answered_by: str | None = None
    continuation: bool = False
    accepted: bool = True
    """False when this call repeated a known idempotency key or submission id."""
    queued_behind: QueuedBehind | None = None
    """Set when the wait answered early, the turn still `pending`, because the turn ahead of
    it waits for a person: decide that turn (`approve`, `submit_tool_result`), then wait
    again (`result`)."""

    @property
    def request_id(self) -> str:
        """The turn id, by the spec's name (what `cancel_chat` takes)."""
        return self.turn_id

    @property
    def done(self) -> bool:
        return self.status in TERMINAL_STATUSES


class Submission(BaseModel):
    """A submission record: the `turns` row as HTTP's `Turn` shows it, without the message."""

    model_config = ConfigDict(frozen=True)

    turn_id: str
    conversation_id: str
    agent: str
    status: TurnStatus
    accepted: bool = True
    idempotency_key: str | None = None
    created_at: datetime
    started_at: datetime | None = None
    completed_at: datetime | None = None
    message_id: str | None = None
    error: str | None = None
    answered_by: str | None = None

    @property
    def submission_id(self) -> str:
        return self.turn_id


class StreamCallback:
    """What `chat()` drives; override what you need (each may be sync or async).

    `on_start(request_id)` before any chunk, with the turn id (for `cancel_chat`);
    `on_event(chunk)` for each UI message chunk; `on_interrupted()` when an attempt was
    interrupted and a retry (the continuation) owns the step, whose partial output the stream
    discards (`reset-step`): not an ending, keep listening. Then exactly one of `on_done()`
    (completed, or skipped) and `on_error(message)` (error, interrupted: recovery spent, or
    aborted: `"aborted: <reason>"`). Any object with some of these methods works too.
    """

    def on_start(self, request_id: str) -> Awaitable[None] | None:
        return None

    def on_event(self, chunk: UIMessageChunk) -> Awaitable[None] | None:
        return None

    def on_done(self) -> Awaitable[None] | None:
        return None

    def on_error(self, message: str) -> Awaitable[None] | None:
        return None

    def on_interrupted(self) -> Awaitable[None] | None:
        return None
