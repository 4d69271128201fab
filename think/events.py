"""What happens inside turns, as typed events an application can subscribe to.

Every event is a frozen pydantic model with a `type` literal (`chat.request.failed`,
`tool.call`, ...), the agent, conversation and turn it belongs to, and when it happened;
`ThinkEvent` is their discriminated union and `ThinkEventTypeAdapter` reads one back from JSON.

    from think import events

    def on_tool(event: events.ThinkEvent) -> None:
        ...

    unsubscribe = events.subscribe(on_tool, types="tool.")  # an exact type, or a prefix
    await events.emit(events.ToolCalled(agent="a", conversation_id="c", turn_id="t", ...))

`emit` always writes the event as one structured line on the `think.events` logger (message:
the type; `extra={"event": {...}}`; WARNING for failures, exhaustion and stalls, INFO
otherwise), so a deployment that only ships logs sees every event without subscribing.

Handlers never break the code that emits. A handler's exception is logged and swallowed. Sync
handlers run inline and must be quick. Async handlers run concurrently and `emit` waits for
them at most `handler_timeout` (1 s); one still running then is left to finish in the
background, not cancelled, so a slow webhook still delivers, and `await bus.drain()` waits for
those stragglers (at shutdown, or in a test).

Events are emitted by activities and the gateway, never by workflow code: they carry a wall
clock timestamp and run arbitrary handlers, neither of which is deterministic.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable, Iterable
from datetime import UTC, datetime
from typing import Annotated, ClassVar, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from think.exceptions import ModelFailureKind, UserError
from think.models import ChatErrorClass, FinishReason, Usage

log = logging.getLogger("think.events")

EventHandler = Callable[["ThinkEvent"], object]
"""A sync function, or an async one (its awaitable is awaited, boundedly)."""


class EventBase(BaseModel):
    model_config = ConfigDict(frozen=True)

    LOG_LEVEL: ClassVar[int] = logging.INFO
    """The level `emit` logs this kind of event at."""

    agent: str
    conversation_id: str
    turn_id: str
    timestamp: datetime = Field(default_factory=lambda: datetime.now(UTC))

    def log_level(self) -> int:
        return self.LOG_LEVEL


class ChatRequestFailed(EventBase):
    """A model request failed (it may still be retried: see `retryable`)."""

    LOG_LEVEL: ClassVar[int] = logging.WARNING
    type: Literal["chat.request.failed"] = "chat.request.failed"
    step: int
    attempt: int
    error: str
    retryable: bool
    classification: ChatErrorClass | None = None
    kind: ModelFailureKind = "other"
    """What went wrong: unreachable, DNS, TLS, a timeout, the key refused, ... (`ModelError`'s)."""


class ChatRecoveryAttempt(EventBase):
    """A failed step is being retried: `attempt` of `max_attempts` is about to run."""

    type: Literal["chat.recovery.attempt"] = "chat.recovery.attempt"
    step: int
    attempt: int
    max_attempts: int
    cause: str


class ChatRecoveryExhausted(EventBase):
    """The recovery budget is spent; the turn ends `interrupted`."""

    LOG_LEVEL: ClassVar[int] = logging.WARNING
    type: Literal["chat.recovery.exhausted"] = "chat.recovery.exhausted"
    step: int
    attempts: int
    cause: str


class ChatStreamStalled(EventBase):
    """The model sent no chunk for `timeout` seconds."""

    LOG_LEVEL: ClassVar[int] = logging.WARNING
    type: Literal["chat.stream.stalled"] = "chat.stream.stalled"
    step: int
    timeout: float


class ChatBudgetExhausted(EventBase):
    """`turn_budget_seconds`, `turn_budget_tokens` or `turn_budget_cost` is spent."""

    LOG_LEVEL: ClassVar[int] = logging.WARNING
    type: Literal["chat.budget.exhausted"] = "chat.budget.exhausted"
    which: Literal["seconds", "tokens", "cost"]
    used: float
    limit: float


class ChatTurnStarted(EventBase):
    """A turn began to run on a worker: its first step is about to ask `model` (once a turn; a
    first step asked again after its worker died does not start it again)."""

    type: Literal["chat.turn.started"] = "chat.turn.started"
    model: str
    queued_ms: int = 0
    """How long the turn waited between its admission and this start."""


class ChatTurnCancelled(EventBase):
    type: Literal["chat.turn.cancelled"] = "chat.turn.cancelled"
    reason: str | None = None


class ChatTurnFinished(EventBase):
    """A turn reached a terminal status."""

    type: Literal["chat.turn.finished"] = "chat.turn.finished"
    status: Literal["completed", "error", "aborted", "skipped", "interrupted"]
    finish_reason: FinishReason | Literal["interrupted"] | None = None
    usage: Usage = Field(default_factory=Usage)
    duration_ms: int = 0

    def log_level(self) -> int:
        return logging.WARNING if self.status in ("error", "interrupted") else logging.INFO


class ChatContextCompacted(EventBase):
    """The conversation's history was summarised to fit the context window."""

    type: Literal["chat.context.compacted"] = "chat.context.compacted"
    trigger: Literal["between_turns", "proactive", "reactive", "manual"] = "between_turns"
    """After a turn, before a step that nears the window, after a provider's overflow, or on
    demand (`ConversationHandle.compact()`, whose event has an empty `turn_id`)."""
    messages_before: int
    messages_after: int | None = None
    summary_tokens: int | None = None
    tokens_before: int | None = None
    """The history as the model read it before, by the session's token counter."""
    tokens_after: int | None = None


class ToolCalled(EventBase):
    type: Literal["tool.call"] = "tool.call"
    tool_name: str
    tool_call_id: str
    outcome: Literal["success", "error", "blocked", "substituted", "denied"]
    duration_ms: int = 0
    error: str | None = None


class ToolFetched(EventBase):
    """A fetch tool was called (`fetch_url`, `fetch_<target>`), refused calls included: the
    audit trail of what the model tried to read."""

    type: Literal["tool.fetch"] = "tool.fetch"
    tool_name: str
    tool_call_id: str
    url: str
    """What the model asked for, as it wrote it (for a target: its base URL and the path)."""
    final_url: str | None = None
    ok: bool
    code: str | None = None
    """The failure's code (`disallowed_url`, `non_2xx`, ...); None when `ok`."""
    status: int | None = None
    bytes: int = 0
    redirects: int = 0
    duration_ms: int = 0

    def log_level(self) -> int:
        return logging.INFO if self.ok else logging.WARNING


class ToolApprovalRequested(EventBase):
    type: Literal["tool.approval.requested"] = "tool.approval.requested"
    approval_id: str
    tool_name: str
    tool_call_id: str | None = None


class ToolApprovalDecided(EventBase):
    type: Literal["tool.approval.decided"] = "tool.approval.decided"
    approval_id: str
    tool_name: str
    approved: bool
    reason: str | None = None
    by: Literal["http", "update", "signal", "timeout"]
    principal: str | None = None
    """Who decided over HTTP (`key:<name>` or `tenant:<tenant>`); None from Temporal."""


ThinkEvent = Annotated[
    ChatRequestFailed
    | ChatRecoveryAttempt
    | ChatRecoveryExhausted
    | ChatStreamStalled
    | ChatBudgetExhausted
    | ChatTurnStarted
    | ChatTurnCancelled
    | ChatTurnFinished
    | ChatContextCompacted
    | ToolCalled
    | ToolFetched
    | ToolApprovalRequested
    | ToolApprovalDecided,
    Field(discriminator="type"),
]
ThinkEventTypeAdapter: TypeAdapter[ThinkEvent] = TypeAdapter(ThinkEvent)
EVENT_TYPES: frozenset[str] = frozenset(
    cls.model_fields["type"].default for cls in get_args(get_args(ThinkEvent)[0])
)
"""Every event type string, for validating subscriptions."""


class EventBus:
    """Fans events out to subscribed handlers; see the module docstring for the guarantees."""

    def __init__(self, *, handler_timeout: float = 1.0) -> None:
        self.handler_timeout = handler_timeout
        self._subscriptions: list[tuple[EventHandler, tuple[str, ...] | None]] = []
        self._background: set[asyncio.Task[None]] = set()

    def subscribe(
        self, handler: EventHandler, *, types: str | Iterable[str] | None = None
    ) -> Callable[[], None]:
        """Call `handler` for every event, or only those whose type is in `types` (a type such
        as `"tool.call"`, or a prefix ending in a dot such as `"tool."`). Returns the function
        that unsubscribes it."""
        patterns = None if types is None else _patterns(types)
        entry = (handler, patterns)
        self._subscriptions.append(entry)

        def unsubscribe() -> None:
            # By identity: the same handler may be subscribed twice, and each is its own.
            self._subscriptions[:] = [e for e in self._subscriptions if e is not entry]

        return unsubscribe

    async def emit(self, event: ThinkEvent) -> None:
        pending = self._dispatch(event)
        if not pending:
            return
        _, late = await asyncio.wait(pending, timeout=self.handler_timeout)
        if late:
            log.warning(
                "%d event handler(s) still running %.1f s after %s; left in the background",
                len(late),
                self.handler_timeout,
                event.type,
            )

    def emit_nowait(self, event: ThinkEvent) -> None:
        """`emit` for sync code: async handlers are scheduled on the running loop, not awaited
        (and skipped, with a warning, when there is no running loop)."""
        self._dispatch(event)

    async def drain(self) -> None:
        """Wait for async handlers left running by earlier emits (bound it with
        `asyncio.timeout`: a handler that never returns is never cancelled by the bus)."""
        if self._background:
            await asyncio.wait(set(self._background))

    def _dispatch(self, event: ThinkEvent) -> list[asyncio.Task[None]]:
        """Log the event, call the matching handlers, start the async ones' awaitables."""
        level = event.log_level()
        if log.isEnabledFor(level):  # the dump is most of a log line's cost
            log.log(level, _log_message(event), extra={"event": event.model_dump(mode="json")})
        started: list[tuple[EventHandler, Awaitable[object]]] = []
        for handler, patterns in list(self._subscriptions):
            if patterns is not None and not _matches(event.type, patterns):
                continue
            try:
                result = handler(event)
            except Exception:  # a handler's bug must not fail the turn that emitted
                log.exception("event handler %r failed on %s", handler, event.type)
                continue
            if inspect.isawaitable(result):
                started.append((handler, result))
        if not started:
            return []
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # emit_nowait from plain sync code
            for handler, awaitable in started:
                if inspect.iscoroutine(awaitable):
                    awaitable.close()
                log.warning("no event loop: async handler %r skipped %s", handler, event.type)
            return []
        tasks = [loop.create_task(_guarded(h, event, a)) for h, a in started]
        for task in tasks:
            # Held until done: the loop keeps only weak references to tasks.
            self._background.add(task)
            task.add_done_callback(self._background.discard)
        return tasks


async def _guarded(handler: EventHandler, event: ThinkEvent, awaitable: Awaitable[object]) -> None:
    try:
        await awaitable
    except Exception:  # as in _dispatch: logged, never raised into the emitter
        log.exception("event handler %r failed on %s", handler, event.type)


def _patterns(types: str | Iterable[str]) -> tuple[str, ...]:
    patterns = (types,) if isinstance(types, str) else tuple(types)
    for pattern in patterns:
        known = (
            any(t.startswith(pattern) for t in EVENT_TYPES)
            if pattern.endswith(".")
            else pattern in EVENT_TYPES
        )
        if not known:
            raise UserError(
                f"no event type matches {pattern!r}; known types: {', '.join(sorted(EVENT_TYPES))}"
            )
    return patterns


def _matches(event_type: str, patterns: tuple[str, ...]) -> bool:
    return any(event_type.startswith(p) if p.endswith(".") else event_type == p for p in patterns)


bus = EventBus()
"""The process-wide bus that Think emits on."""


def subscribe(
    handler: EventHandler, *, types: str | Iterable[str] | None = None
) -> Callable[[], None]:
    return bus.subscribe(handler, types=types)


async def emit(event: ThinkEvent) -> None:
    await bus.emit(event)


def emit_nowait(event: ThinkEvent) -> None:
    bus.emit_nowait(event)


def _log_message(event: ThinkEvent) -> str:
    """The log line's text: the type and the ids, so a plain-text log (the terminal of `think
    dev`) says which turn an event is about; `extra["event"]` carries every field."""
    text = f"{event.type} agent={event.agent} conversation={event.conversation_id} "
    text += f"turn={event.turn_id}"
    if isinstance(event, ChatTurnFinished):
        text += f" status={event.status}"
    return text
