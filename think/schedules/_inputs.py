"""The occurrence workflow's and activity's durable contracts (add optional fields with
defaults; never remove or retype one while schedules that use it exist)."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel


class OccurrenceInput(BaseModel):
    """The schedule action's argument: who the task is, never what it does (the activity
    reads the declaration as the worker has it now, so an updated prompt needs no update of
    running workflows)."""

    schedule_id: str
    agent: str
    task: str
    tenant: str = "default"
    conversation_id: str | None = None
    """Set for the conversation scope: the conversation whose tasks these are."""
    attempts: int = 1
    schedule: str = ""
    """The declaration as written, the schedule kind, its timezone and the conversation a
    prompt lands in: informational, for listings (the action's input is what
    `GET .../schedules` reads back)."""
    kind: str = ""
    timezone: str | None = None
    action: Literal["prompt", "handler"] = "prompt"
    target_conversation_id: str | None = None
    scheduled_for: datetime | None = None
    """Normally absent: the workflow reads the intended time Temporal gave it."""


class OccurrenceRequest(BaseModel):
    """What the activity needs: the input, with the intended time settled."""

    occurrence: OccurrenceInput
    scheduled_for: datetime


class OccurrenceResult(BaseModel):
    outcome: Literal["submitted", "duplicate", "handled", "skipped"]
    """`duplicate`: the turn existed already (a retried delivery); `skipped`: the task is no
    longer declared."""
    turn_id: str | None = None
    conversation_id: str | None = None
