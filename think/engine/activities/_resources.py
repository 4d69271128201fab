"""What a worker's activities share: the store, the agents, the settings, the paths its
model steps read, the Temporal client (to start a conversation's next turn) and the cancel
listener. One instance per worker, handed to each group of activities instead of an
inheritance chain, so a reader sees what each one depends on."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field

from temporalio.client import Client
from temporalio.exceptions import ApplicationError

from think._settings import Settings
from think.agent._conversation_methods import bind_config
from think.agent._registry import AgentRegistry
from think.agent._think import Think
from think.engine.activities._turn_state import ended_alone
from think.exceptions import NON_RETRYABLE_USER_ERROR, UserError
from think.sessions._chat_history import ChatHistories
from think.storage import PathCache, Store, StoredMessage, TurnRecord
from think.streaming import ChunkListener
from think.turns._dispatch import DispatchFailed, hand_off

log = logging.getLogger("think.engine.activities")


class StartedReads:
    """`Store.read_started_turn` of the turns this worker started (`think.engine._announced`),
    made beside Temporal's start call: the start is eager, so the turn's first step most
    likely runs in this process, and takes the read instead of making it (`take`). One the
    step does not take (it ran elsewhere) is dropped after `KEEP_SECONDS`."""

    KEEP_SECONDS = 30.0

    def __init__(self) -> None:
        self._reads: dict[str, asyncio.Task[tuple[TurnRecord, list[StoredMessage]] | None]] = {}

    def read(self, store: Store, turn_id: str) -> None:
        async def started() -> tuple[TurnRecord, list[StoredMessage]] | None:
            async with store.db.connection() as conn:
                return await store.read_started_turn(conn, turn_id)

        self._reads[turn_id] = asyncio.create_task(started())
        asyncio.get_running_loop().call_later(self.KEEP_SECONDS, self._drop, turn_id)

    def _drop(self, turn_id: str) -> None:
        task = self._reads.pop(turn_id, None)
        if task is not None and task.done() and not task.cancelled():
            task.exception()  # retrieved: a failed read nobody took is not worth a warning

    async def take(self, turn_id: str) -> tuple[TurnRecord, list[StoredMessage]] | None:
        """The read made for `turn_id`, once; None when there is none (or it failed: the
        step then reads for itself)."""
        task = self._reads.pop(turn_id, None)
        if task is None:
            return None
        try:
            return await task
        except Exception:
            log.warning("the read made for turn %s at its start failed", turn_id, exc_info=True)
            return None


@dataclass
class ActivityResources:
    store: Store
    registry: AgentRegistry
    settings: Settings
    paths: PathCache = field(default_factory=PathCache)
    """The paths this worker's model steps read, kept for their next steps."""
    histories: ChatHistories = field(default_factory=ChatHistories)
    """What those paths became for the model, kept likewise."""
    temporal: Client | None = None
    """Starts the conversation's next turn when one ends (the worker sets it)."""
    cancels: ChunkListener | None = None
    """A listener on `think_cancel`, so a cancel reaches a streaming step at once."""
    started_reads: StartedReads = field(default_factory=StartedReads)
    """First steps' reads, made by the worker that started their workflow beside its start."""

    def agent(self, name: str) -> Think:
        try:
            return self.registry.get(name)()
        except UserError as exc:
            raise ApplicationError(
                str(exc), type=NON_RETRYABLE_USER_ERROR, non_retryable=True
            ) from exc

    def bound_agent(self, turn: TurnRecord) -> Think:
        """A fresh agent for the turn, with its conversation's configuration (`get_config`),
        which the turn's own read brought along."""
        agent = self.agent(turn.agent)
        bind_config(agent, turn.conversation_config)
        return agent

    async def hand_off(self, turn_id: str) -> None:
        """Start the workflow of the turn that waits behind this one, if any (the sweeper
        does it later if this fails)."""
        if self.temporal is None or ended_alone(turn_id):
            return
        try:
            await hand_off(self.store, self.temporal, self.settings.task_queue, turn_id)
        except DispatchFailed:
            log.warning("turn %s ended, but its successor could not be started", turn_id)
