"""The occurrence activity: admit a prompt task's turn, or run a handler task's handler.

A prompt becomes a turn through the same admission as a user's message
(`ConversationHandle.submit_messages`), and only while its tenant is within its daily budgets
(`THINK_TENANT_DAILY_TOKENS`, `THINK_TENANT_DAILY_COST`; past one the occurrence is skipped, as a
user's submission is refused), with the occurrence key as its idempotency key: a
second delivery of the same occurrence (an activity or workflow retried after a crash, a
duplicate start) finds the turn already admitted and admits nothing. The turn queues behind
whatever the conversation is running, as a user's turn would.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from temporalio import activity

from think.exceptions import AgentNotFoundError
from think.schedules._inputs import OccurrenceRequest, OccurrenceResult
from think.schedules._names import OCCURRENCE_ACTIVITY, idempotency_key, occurrence_key
from think.schedules._reconcile import check_task, find_task
from think.schedules._task import ScheduledRun

if TYPE_CHECKING:
    from think.turns import ThinkService

log = logging.getLogger("think.schedules")


class ScheduleActivities:
    """Holds the worker's turn API (its Postgres and Temporal); one per worker."""

    def __init__(self, service: ThinkService) -> None:
        # Here, not at the top: the workflow sandbox must not load the storage stack.
        from think.storage import DailyBudgets

        self.service = service
        self.budgets = DailyBudgets.of(service.settings)
        """The tenants' daily budgets, which a scheduled prompt is new work against, as a
        user's submission is at the gateway."""

    def activities(self) -> list[Any]:
        return [self.run_occurrence]

    @activity.defn(name=OCCURRENCE_ACTIVITY)
    async def run_occurrence(self, request: OccurrenceRequest) -> OccurrenceResult:
        """Run the occurrence: its action's failures get the task's `retry`, outages longer."""
        # Here, not at the top: the occurrence's workflow module imports this package, and the
        # workflow sandbox must not load the storage stack (tests/house/test_layers.py).
        from think.storage import bounded_failures

        attempts = max(1, request.occurrence.attempts)
        with bounded_failures(f"scheduled task {request.occurrence.task!r}", attempts=attempts):
            return await self._run_occurrence(request)

    async def _run_occurrence(self, request: OccurrenceRequest) -> OccurrenceResult:
        occ = request.occurrence
        try:
            cls = self.service.registry.get(occ.agent)
        except AgentNotFoundError:
            log.warning("schedule %s: agent %r is not hosted here", occ.schedule_id, occ.agent)
            return OccurrenceResult(outcome="skipped")
        agent = cls()
        if occ.conversation_id is not None:
            scope = self.service.conversation(cls, occ.conversation_id, tenant=occ.tenant)
            agent._config = await scope.get_config()
        task = find_task(agent, occ.task)
        if task is None:
            # Removed since the schedule was armed; the next reconcile deletes the schedule.
            log.warning("schedule %s: task %r is no longer declared", occ.schedule_id, occ.task)
            return OccurrenceResult(outcome="skipped")
        key = occurrence_key(occ.schedule_id, request.scheduled_for)
        if task.prompt is not None:
            over = await self.budgets.over(self.service.store, occ.tenant)
            if over is not None:
                log.warning(
                    "schedule %s: tenant %r is over its %s budget (%s today, UTC); the "
                    "occurrence is skipped",
                    occ.schedule_id,
                    occ.tenant,
                    over.budget,
                    over.spent,
                )
                return OccurrenceResult(outcome="skipped")
            target = task.conversation_id or occ.conversation_id or occ.task
            conversation = self.service.conversation(cls, target, tenant=occ.tenant)
            submission = await conversation.submit_messages(
                task.prompt, idempotency_key=key, concurrency="queue"
            )
            return OccurrenceResult(
                outcome="submitted" if submission.accepted else "duplicate",
                turn_id=submission.turn_id,
                conversation_id=target,
            )
        assert task.handler is not None  # declarations are checked: prompt or handler
        parsed = check_task(occ.task, task, agent.get_default_timezone())
        await task.handler(
            ScheduledRun(
                task_id=occ.task,
                scheduled_for=request.scheduled_for,
                occurrence_key=key,
                idempotency_key=idempotency_key(key),
                schedule=task.schedule,
                schedule_kind=parsed.kind,
                timezone=parsed.timezone,
                metadata=dict(task.metadata),
                conversation_id=occ.conversation_id,
            )
        )
        return OccurrenceResult(outcome="handled", conversation_id=occ.conversation_id)
