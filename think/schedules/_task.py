"""What an agent declares (`ScheduledTask`) and what a handler receives (`ScheduledRun`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from think.schedules._dsl import ScheduleKind

ScheduledTasksScope = Literal["agent", "conversation"]


@dataclass(frozen=True)
class ScheduledRun:
    """One occurrence of a handler task. Delivery is at least once (an activity retried
    after a crash runs the handler again): make the handler's effect idempotent with
    `idempotency_key` (or `occurrence_key`), e.g. as the id of what it creates."""

    task_id: str
    scheduled_for: datetime
    """The occurrence's intended time (UTC), not when it happened to run."""
    occurrence_key: str
    """`<schedule id>@<scheduled_for>`: the same for every delivery of one occurrence."""
    idempotency_key: str
    """A short hash of `occurrence_key`, safe as an id anywhere (a workflow id, a row key)."""
    schedule: str
    schedule_kind: ScheduleKind
    timezone: str | None
    metadata: dict[str, Any] = field(default_factory=dict)
    conversation_id: str | None = None
    """The conversation whose tasks these are, for `get_scheduled_tasks_scope() ==
    "conversation"`; None for the agent's own tasks."""


@dataclass(frozen=True)
class ScheduledTask:
    """A recurring prompt or handler, returned by `Think.get_scheduled_tasks()`.

    Give exactly one of `prompt` (a turn in `conversation_id`, by default the task's own id,
    through the normal admission) or `handler` (an async method run in an activity with a
    `ScheduledRun`). `retry` is how many times a failed action is tried again before the
    failure is logged; the next occurrence comes either way.
    """

    schedule: str
    prompt: str | None = None
    handler: Callable[[ScheduledRun], Awaitable[None]] | None = None
    timezone: str | None = None
    conversation_id: str | None = None
    retry: int = 0
    metadata: dict[str, Any] = field(default_factory=dict)
