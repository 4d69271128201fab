"""An agent with scheduled tasks (docs/scheduled-tasks.md): a weekly prompt, a frequent one
into a shared conversation, and a handler that writes a run ledger.

    THINK_AGENTS=examples.digest:Digest think dev
    think schedules
"""

import asyncio
import json
from pathlib import Path

from think import ScheduledRun, ScheduledTask, Think

LEDGER = Path(".think/ledger.jsonl")


def append_once(key: str, entry: dict[str, str]) -> None:
    LEDGER.parent.mkdir(exist_ok=True)
    if key not in (LEDGER.read_text() if LEDGER.exists() else ""):
        with LEDGER.open("a") as ledger:
            ledger.write(json.dumps({"key": key, **entry}) + "\n")


class Digest(Think):
    name = "digest"

    def get_default_timezone(self) -> str | None:
        return "Europe/London"

    async def write_ledger(self, run: ScheduledRun) -> None:
        # At least once: the idempotency key makes a second delivery a no-op.
        entry = {"for": run.scheduled_for.isoformat(), "zone": run.timezone or "UTC"}
        await asyncio.to_thread(append_once, run.idempotency_key, entry)

    def get_scheduled_tasks(self) -> dict[str, ScheduledTask]:
        return {
            "weekly": ScheduledTask(
                schedule="every week on monday at 09:00",
                prompt="Summarise last week's commits.",
            ),
            "ticks": ScheduledTask(
                schedule="every 5 minutes", prompt="Check the queue.", conversation_id="ops"
            ),
            "ledger": ScheduledTask(
                schedule="every weekday at 07:30",
                timezone="America/New_York",
                handler=self.write_ledger,
                retry=3,
                metadata={"kind": "ledger"},
            ),
        }
