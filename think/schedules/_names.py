"""Stable names and ids: the occurrence workflow and activity, schedule ids, occurrence keys.

A schedule id names the deployment's task queue, the agent and the task (and, for the
conversation scope, the tenant and the conversation), each percent-encoded, so `:` inside a
name can never make two tasks share an id, and a worker finds its own schedules by prefix.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import UTC, datetime
from urllib.parse import quote, unquote

from temporalio.common import SearchAttributeKey

OCCURRENCE_WORKFLOW = "think.ScheduledOccurrence"
OCCURRENCE_ACTIVITY = "think.scheduled_occurrence"
PREFIX = "think-schedule"
SCHEDULED_START_KEY = SearchAttributeKey.for_datetime("TemporalScheduledStartTime")
"""Set by Temporal on every workflow a schedule starts: the occurrence's intended time, the
same on a retry, which is what makes the occurrence key stable."""


def _q(part: str) -> str:
    return quote(part, safe="")


@dataclass(frozen=True)
class ScheduleRef:
    """Who a schedule belongs to; `schedule_id` and `parse` are inverses."""

    task_queue: str
    agent: str
    task: str
    tenant: str | None = None
    conversation_id: str | None = None

    @property
    def schedule_id(self) -> str:
        parts = [PREFIX, self.task_queue, self.agent, self.task]
        if self.conversation_id is not None:
            parts += [self.tenant or "default", self.conversation_id]
        return ":".join([parts[0], *map(_q, parts[1:])])

    @classmethod
    def parse(cls, schedule_id: str) -> ScheduleRef | None:
        """None for a schedule that is not ours."""
        parts = schedule_id.split(":")
        if parts[0] != PREFIX or len(parts) not in (4, 6):
            return None
        queue, agent, task, *rest = map(unquote, parts[1:])
        if rest:
            return cls(queue, agent, task, rest[0], rest[1])
        return cls(queue, agent, task)


def agent_prefix(task_queue: str, agent: str) -> str:
    return f"{PREFIX}:{_q(task_queue)}:{_q(agent)}:"


def occurrence_key(schedule_id: str, scheduled_for: datetime) -> str:
    when = scheduled_for.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return f"{schedule_id}@{when}"


def idempotency_key(occurrence: str) -> str:
    return "occ_" + hashlib.sha256(occurrence.encode()).hexdigest()[:32]
