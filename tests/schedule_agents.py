"""Agents with scheduled tasks, hosted by the schedule tests' own workers (never by the
session's shared worker, so their schedules cannot touch other tests).

Their wall-clock tasks are set three days ahead of today, so no occurrence comes by itself
while the tests run: every occurrence a test sees is one it triggered. Handlers append their
`ScheduledRun` to the JSON-lines file `THINK_TEST_LEDGER` names.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path

from think import ScheduledRun, ScheduledTask, Think
from think.schedules import ScheduledTasksScope
from think.schedules._dsl import DAYS

# Temporal numbers days from Sunday (0); Python's weekday() from Monday (0). Chosen once, by
# the first process that imports this (the test run), and handed to the workers and gateways
# it starts through the environment: a run that crosses midnight UTC would otherwise have its
# processes declare different days.
FAR_DAY = os.environ.setdefault(
    "TEST_SCHEDULE_FAR_DAY", DAYS[(datetime.now(UTC).weekday() + 1 + 3) % 7]
)
FAR = f"every week on {FAR_DAY} at 12:00"


def _record(run: ScheduledRun, **extra: object) -> None:
    entry = {**asdict(run), "scheduled_for": run.scheduled_for.isoformat(), **extra}
    with Path(os.environ["THINK_TEST_LEDGER"]).open("a") as ledger:
        ledger.write(json.dumps(entry) + "\n")


def _attempt(run: ScheduledRun) -> int:
    """This delivery's number for the occurrence, counted in the ledger."""
    _record(run, attempt=True)
    lines = Path(os.environ["THINK_TEST_LEDGER"]).read_text().splitlines()
    return sum(1 for line in lines if json.loads(line)["idempotency_key"] == run.idempotency_key)


class Digest(Think):
    name = "sched_digest"

    def get_default_timezone(self) -> str | None:
        return "Europe/London"

    async def write_ledger(self, run: ScheduledRun) -> None:
        _record(run)

    async def flaky(self, run: ScheduledRun) -> None:
        if _attempt(run) < 3:
            raise RuntimeError("flaky: not yet")

    async def broken(self, run: ScheduledRun) -> None:
        _attempt(run)
        raise RuntimeError("the ledger is on fire")

    def get_scheduled_tasks(self) -> dict[str, ScheduledTask]:
        return {
            "weekly": ScheduledTask(schedule=FAR, prompt="Summarise last week's commits."),
            "ticks": ScheduledTask(
                schedule=f"every week on {FAR_DAY} at 13:00 in Asia/Tokyo",
                prompt="Check the queue.",
                conversation_id="ops",
            ),
            "ledger": ScheduledTask(
                schedule=f"every week on {FAR_DAY} at 07:30",
                timezone="America/New_York",
                handler=self.write_ledger,
                retry=3,
                metadata={"kind": "ledger"},
            ),
            "flaky": ScheduledTask(schedule=FAR, handler=self.flaky, retry=2),
            "broken": ScheduledTask(schedule=FAR, handler=self.broken, retry=1),
        }


class Churn(Think):
    """Declares the tasks `THINK_TEST_TASKS` lists (`id=schedule;...`), as a deploy would
    change its code: what the reconcile test starts workers with."""

    name = "sched_churn"

    def get_default_timezone(self) -> str | None:
        return "UTC"

    async def note(self, run: ScheduledRun) -> None:
        _record(run)

    def get_scheduled_tasks(self) -> dict[str, ScheduledTask]:
        spec = os.environ.get("THINK_TEST_TASKS", "")
        pairs = [item.split("=", 1) for item in spec.split(";") if item]
        return {task: ScheduledTask(schedule=when, handler=self.note) for task, when in pairs}


class PerConversation(Think):
    """Conversation scope: each conversation's task comes from its own configuration."""

    name = "sched_per_conversation"

    def get_scheduled_tasks_scope(self) -> ScheduledTasksScope:
        return "conversation"

    def get_scheduled_tasks(self) -> dict[str, ScheduledTask]:
        config = self.get_config()
        if "reminder" not in config:
            return {}
        when = config.get("when", FAR + " in UTC")
        return {"reminder": ScheduledTask(schedule=when, prompt=config["reminder"])}


class Misdeclared(Think):
    name = "sched_misdeclared"

    def get_scheduled_tasks(self) -> dict[str, ScheduledTask]:
        return {"nightly": ScheduledTask(schedule="every night at 3", prompt="Tidy up.")}
