"""The eager start: this worker starts the turns a gateway announced (`ANNOUNCE_CHANNEL`),
asking Temporal for eager execution, so the workflow's first task comes back in the start's
answer instead of through the task queue; the first step's work up to the model request is
begun beside the start (`EarlySteps`). Of the workers told, the first to mark the turn
(`Store.claim_start`) starts it; a turn nobody starts is started by its gateway after
`ANNOUNCED_GRACE`. The sequence: docs/architecture.md, "The eager start, and the first step
begun beside it"; what it saves: docs/benchmarks.md.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field

from temporalio.client import Client

from think.engine.activities import EarlySteps
from think.storage import ANNOUNCE_CHANNEL, Store
from think.streaming import listen_forever
from think.turns import ThinkService, start_turn_workflow

log = logging.getLogger("think.worker.announced")


@dataclass(eq=False)
class AnnouncedTurns:
    """The LISTEN for this worker's task queue's announcements, and the starts it sends."""

    dsn: str
    store: Store
    client: Client
    task_queue: str
    early: EarlySteps | None = None
    service: ThinkService | None = None
    listening: asyncio.Event = field(default_factory=asyncio.Event)
    """Set once the LISTEN is in place (and again after a reconnect)."""
    _starting: set[asyncio.Task[None]] = field(default_factory=set)

    async def run(self) -> None:
        """Until cancelled."""
        await listen_forever(
            self.dsn,
            ANNOUNCE_CHANNEL,
            self._announced,
            on_connect=self.listening.set,
            on_lost=self.listening.clear,
        )

    def _announced(self, payload: str) -> None:
        task_queue, _, turn_id = payload.rpartition("\n")
        if task_queue != self.task_queue:
            return
        task = asyncio.create_task(self._start(turn_id))
        self._starting.add(task)
        task.add_done_callback(self._starting.discard)

    async def _start(self, turn_id: str) -> None:
        try:
            turn = await self.store.claim_start(turn_id)
            if turn is None:
                return  # another worker has it, or it has begun or ended
            if self.early is None:
                await start_turn_workflow(self.client, self.task_queue, turn)
                return
            # Its first step, up to the model request, beside the start: the start is eager,
            # so the step runs in this process and takes it on.
            self.early.begin(turn_id, self.service)
            try:
                eager = await start_turn_workflow(self.client, self.task_queue, turn)
            except BaseException:
                self.early.drop(turn_id)
                raise
            self.early.started(turn_id, eager=eager)
        except Exception:
            # Its gateway starts it after ANNOUNCED_GRACE; the sweeper after that.
            log.warning("starting announced turn %s failed", turn_id, exc_info=True)
