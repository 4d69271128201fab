"""The one queue activity a turn workflow may run before its first step: how long a
"debounce" head still waits for quiet. Everything else `message_concurrency` does is decided
in Postgres, at admission (skip, refuse, cancel) or as the turn starts (merge, roll back,
continue), in the transactions that take the conversation's queue lock.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from temporalio import activity

from think.storage import Store, bounded_failures, quiet_left
from think.workflows.inputs import QuietInput, QuietResult
from think.workflows.names import QUIET_ACTIVITY


@dataclass(eq=False)
class DebounceActivities:
    """The debounce's activity, on the worker's store."""

    store: Store

    def activities(self) -> list[Any]:
        return [self.quiet_left]

    @activity.defn(name=QUIET_ACTIVITY)
    async def quiet_left(self, inp: QuietInput) -> QuietResult:
        """Seconds until the turn's conversation has been quiet for `inp.seconds`."""
        with bounded_failures("debounce", inp.turn_id):
            return await self._quiet_left(inp)

    async def _quiet_left(self, inp: QuietInput) -> QuietResult:
        turn = await self.store.get_turn(inp.turn_id)
        if turn is None or turn.status != "pending":
            return QuietResult(seconds=0.0)
        async with self.store.db.connection() as conn:
            return QuietResult(seconds=await quiet_left(conn, turn, inp.seconds))
