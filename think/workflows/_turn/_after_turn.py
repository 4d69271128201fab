"""What runs once a turn is over, off its path: the agent's `on_chat_response`, and
compaction when the turn left the conversation over `compact_after`."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.workflow import ParentClosePolicy

with workflow.unsafe.imports_passed_through():
    from think.workflows.inputs import AfterTurnInput, TurnInput
    from think.workflows.names import (
        AFTER_TURN_WORKFLOW,
        CHAT_RESPONSE_ACTIVITY,
        COMPACT_ACTIVITY,
        after_turn_workflow_id,
    )

from think.workflows._turn._activities import COMPACT_RETRY, DB_RETRY


async def start_after_turn(inp: TurnInput, *, respond: bool, compact: bool) -> None:
    """Start `AfterTurnWorkflow` for the turn that has just ended, when it has anything to do.

    `on_chat_response` runs once the turn is over and the conversation is free, so it may
    start (and wait for) another turn: in a workflow of its own, left running. Compaction after
    a turn runs there too, off the turn's path."""
    if not (respond or compact):
        return
    # A plain TurnInput when there is nothing to compact, as before compaction existed.
    after: TurnInput = (
        AfterTurnInput(
            conversation=inp.conversation,
            turn_id=inp.turn_id,
            respond=respond,
            compact=True,
        )
        if compact
        else inp
    )
    summary = " and ".join(
        w for w, on in (("on_chat_response", respond), ("compaction", compact)) if on
    )
    await workflow.start_child_workflow(
        AFTER_TURN_WORKFLOW,
        after,
        # The turn's own id (`turn:...`): the same value the child had when ids were
        # `turn-<agent>-<conversation>-<turn>`, so histories of either kind replay.
        id=after_turn_workflow_id(workflow.info().workflow_id),
        parent_close_policy=ParentClosePolicy.ABANDON,
        static_summary=f"{summary} of turn {inp.turn_id}",
    )


@workflow.defn(name=AFTER_TURN_WORKFLOW)
class AfterTurnWorkflow:
    """Runs the agent's `on_chat_response` for a finished turn, and compacts the conversation
    if the turn left it over `compact_after` (both at once: neither waits for the other)."""

    @workflow.run
    async def run(self, inp: AfterTurnInput) -> None:
        jobs = []
        if inp.respond:
            jobs.append(
                _after_turn_activity(CHAT_RESPONSE_ACTIVITY, inp, DB_RETRY, "on_chat_response")
            )
        if inp.compact:
            # A summarising model that keeps failing is given up on (the next turn tries
            # again); Postgres outages are retried inside those attempts' budget.
            jobs.append(_after_turn_activity(COMPACT_ACTIVITY, inp, COMPACT_RETRY, "compaction"))
        await asyncio.gather(*jobs)


async def _after_turn_activity(
    activity: str, inp: AfterTurnInput, retry_policy: RetryPolicy, summary: str
) -> None:
    """One job of the after-turn workflow: an activity of its own (user code, heartbeating),
    not a local one, so that a long `on_chat_response` holds no workflow task."""
    await workflow.execute_activity(
        activity,
        inp,
        start_to_close_timeout=timedelta(minutes=10),
        heartbeat_timeout=timedelta(seconds=30),
        retry_policy=retry_policy,
        summary=summary,
    )
