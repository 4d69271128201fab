"""The retention sweep: ended turn records past `THINK_TURN_RETENTION_DAYS`, and conversations
idle past `THINK_CONVERSATION_RETENTION_DAYS`, each agent's own `turn_retention_days` /
`conversation_retention_days` overriding the deployment's.

Batched and idempotent: each batch reads what is expired now and deletes it through the
existing paths (`delete_turns(keep_usage=True)`, the turns layer's `delete_conversation`), so a
sweep cut off anywhere (a worker killed, the activity retried) deletes the rest next time and
nothing twice. Usage survives a turn's record: its steps move to `model_calls` in the deleting
transaction, so `GET /v1/usage` and the daily budgets read the same after the sweep; a deleted
conversation's usage goes with it, as `DELETE …/conversations/{cid}` does.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from think.agent import Think
from think.retention._inputs import SweepResult
from think.retention._policy import retention_days
from think.storage import (
    ConversationStillActive,
    conversations_with_expired_turns,
    delete_turns,
    idle_conversations,
)
from think.turns import ThinkService, delete_conversation

log = logging.getLogger("think.retention")


async def sweep(
    service: ThinkService, *, batch: int, progress: Callable[[], None] = lambda: None
) -> SweepResult:
    """Delete what is expired for every hosted agent, `batch` at a time, until none is left;
    `progress` is called between batches (the activity's heartbeat)."""
    result = SweepResult()
    now = datetime.now(UTC)
    for agent in service.registry:
        turn_days, conversation_days = retention_days(agent, service.settings)
        if conversation_days is not None:
            result.conversations += await _idle(
                service, agent, now - timedelta(days=conversation_days), batch, progress
            )
        if turn_days is not None:
            result.turns += await _turns(
                service, agent, now - timedelta(days=turn_days), batch, progress
            )
    if result.turns or result.conversations:
        log.info(
            "retention: deleted %d turn records and %d idle conversations",
            result.turns,
            result.conversations,
        )
    return result


async def _turns(
    service: ThinkService,
    agent: type[Think],
    cutoff: datetime,
    batch: int,
    progress: Callable[[], None],
) -> int:
    deleted = 0
    while uids := await conversations_with_expired_turns(service.store, agent.name, cutoff, batch):
        this_round = 0
        for uid in uids:
            ids = await delete_turns(
                service.store, uid, before=cutoff, keep_usage=True, limit=batch
            )
            this_round += len(ids)
        deleted += this_round
        progress()
        if not this_round:
            break  # each one locked by a writer this moment: the next sweep takes them
    return deleted


async def _idle(
    service: ThinkService,
    agent: type[Think],
    cutoff: datetime,
    batch: int,
    progress: Callable[[], None],
) -> int:
    deleted = 0
    skipped: set[str] = set()
    while found := [
        c
        for c in await idle_conversations(service.store, agent.name, cutoff, batch + len(skipped))
        if c.uid not in skipped
    ]:
        for conversation in found:
            try:
                await delete_conversation(
                    service.store,
                    service.temporal,
                    service.settings.task_queue,
                    agent,
                    conversation,
                )
                deleted += 1
            except ConversationStillActive:
                # Submissions arrived meanwhile: no longer idle, and the next sweep looks again.
                skipped.add(conversation.uid)
            progress()
    return deleted
