"""What a worker's activities share: the store, the agents, the settings, the paths its
model steps read, the Temporal client (to start a conversation's next turn) and the cancel
listener. One instance per worker, handed to each group of activities instead of an
inheritance chain, so a reader sees what each one depends on."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from temporalio.client import Client
from temporalio.exceptions import ApplicationError

from think._settings import Settings
from think.agent import AgentRegistry, Think, bind_config
from think.engine.activities._turn_state import ended_alone
from think.exceptions import NON_RETRYABLE_USER_ERROR, UserError
from think.sessions import ChatHistories
from think.storage import PathCache, Store, TurnRecord
from think.streaming import ChunkListener
from think.turns import DispatchFailed, hand_off

log = logging.getLogger("think.engine.activities")


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

    async def ended_turn(self, turn_id: str) -> tuple[TurnRecord, Think] | None:
        """A turn as stored and a fresh agent bound to it (`bound_agent`), for the work that
        follows its end; None when the turn is gone (deleted since)."""
        turn = await self.store.get_turn(turn_id)
        return None if turn is None else (turn, self.bound_agent(turn))

    async def hand_off(self, turn_id: str) -> None:
        """Start the workflow of the turn that waits behind this one, if any (the sweeper
        does it later if this fails)."""
        if self.temporal is None or ended_alone(turn_id):
            return
        try:
            await hand_off(self.store, self.temporal, self.settings.task_queue, turn_id)
        except DispatchFailed:
            log.warning("turn %s ended, but its successor could not be started", turn_id)
