"""The activities behind `message_concurrency`: what the conversation workflow writes when a
submission skips, absorbs or rolls back others.

Short database transactions, run as local activities in the conversation's workflow task;
each is idempotent (conditional on a turn still being `pending`), so a retry changes nothing
twice. No user code runs here.
"""

from __future__ import annotations

from typing import Any

from temporalio import activity

from think.storage import Store, prepare_turn, supersede_turns
from think.workflows._inputs import (
    PrepareTurnInput,
    PrepareTurnResult,
    SupersedeInput,
    SupersedeResult,
)
from think.workflows._names import PREPARE_ACTIVITY, SUPERSEDE_ACTIVITY


class SubmissionActivities:
    def __init__(self, store: Store) -> None:
        self.store = store

    def activities(self) -> list[Any]:
        return [self.supersede_turns, self.prepare_turn]

    @activity.defn(name=SUPERSEDE_ACTIVITY)
    async def supersede_turns(self, inp: SupersedeInput) -> SupersedeResult:
        """Skip the queued submissions a newer one replaces; note why the running one is
        about to be cancelled."""
        skipped, running = await supersede_turns(
            self.store, inp.skip, by=inp.by, mode=inp.mode, interrupt=inp.interrupt
        )
        return SupersedeResult(skipped=skipped, interrupting=running)

    @activity.defn(name=PREPARE_ACTIVITY)
    async def prepare_turn(self, inp: PrepareTurnInput) -> PrepareTurnResult:
        run, absorbed = await prepare_turn(
            self.store,
            inp.head,
            absorb=inp.absorb,
            continuation=inp.continuation,
            rollback_of=inp.rollback_of,
        )
        return PrepareTurnResult(run=run, absorbed=absorbed)
