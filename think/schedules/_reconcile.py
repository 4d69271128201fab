"""Declared tasks, checked, and kept in step with their Temporal Schedules.

Reconciling is create-or-update of every declared task and delete of every schedule of ours
(found by id prefix) no longer declared. Each step tolerates a concurrent worker doing the
same: a create that loses the race becomes an update, an update that loses a conflict is
retried, a delete of a schedule already gone is done. An update keeps the schedule's state,
so a schedule an operator paused in the Temporal UI stays paused across deploys.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from temporalio.client import (
    Client,
    Schedule,
    ScheduleActionStartWorkflow,
    ScheduleAlreadyRunningError,
    ScheduleOverlapPolicy,
    SchedulePolicy,
    ScheduleState,
    ScheduleUpdate,
    ScheduleUpdateInput,
)
from temporalio.service import RPCError, RPCStatusCode

from think._messages import ID
from think.schedules._dsl import ParsedSchedule, ScheduleDeclarationError, parse_schedule
from think.schedules._inputs import OccurrenceInput
from think.schedules._names import OCCURRENCE_WORKFLOW, ScheduleRef, agent_prefix
from think.schedules._task import ScheduledTask

if TYPE_CHECKING:
    from think.agent import Think

OVERLAP = ScheduleOverlapPolicy.SKIP
"""An occurrence still waiting for a worker (all workers down) makes the later ones skip:
when workers return, the late occurrence runs once and nothing is backfilled."""
CATCHUP_WINDOW = timedelta(minutes=5)
"""How late (after a Temporal outage) an occurrence may still start. Set explicitly: the
server's default is a year, which would replay a year of missed occurrences. With `OVERLAP`
at most one of those within the window starts."""
_CONFLICT_RETRIES = 5


@dataclass(frozen=True)
class ArmedTask:
    """A declared task, checked and parsed, with the schedule id it lives under."""

    ref: ScheduleRef
    task: ScheduledTask
    parsed: ParsedSchedule

    @property
    def target_conversation(self) -> str:
        return self.task.conversation_id or self.ref.conversation_id or self.ref.task

    def occurrence_input(self) -> OccurrenceInput:
        return OccurrenceInput(
            schedule_id=self.ref.schedule_id,
            agent=self.ref.agent,
            task=self.ref.task,
            tenant=self.ref.tenant or "default",
            conversation_id=self.ref.conversation_id,
            attempts=self.task.retry + 1,
            schedule=self.parsed.text,
            kind=self.parsed.kind,
            timezone=self.parsed.timezone,
            action="prompt" if self.task.prompt is not None else "handler",
            target_conversation_id=self.target_conversation
            if self.task.prompt is not None
            else None,
        )

    def schedule(self) -> Schedule:
        return Schedule(
            action=ScheduleActionStartWorkflow(
                OCCURRENCE_WORKFLOW,
                self.occurrence_input(),
                id=self.ref.schedule_id,
                task_queue=self.ref.task_queue,
                static_summary=f"{self.ref.agent} scheduled task {self.ref.task!r}",
            ),
            spec=self.parsed.spec,
            policy=SchedulePolicy(overlap=OVERLAP, catchup_window=CATCHUP_WINDOW),
            state=ScheduleState(note=f"declared by {self.ref.agent}.get_scheduled_tasks()"),
        )


def check_task(task_id: str, task: object, default_timezone: str | None) -> ParsedSchedule:
    """Refuse what cannot run, naming the task: the wrong type, both or neither of prompt
    and handler, a bad retry, a conversation id the turn API would refuse, a bad schedule."""
    if not isinstance(task, ScheduledTask):
        raise ScheduleDeclarationError(
            task_id, str(getattr(task, "schedule", "")), "is not a think.ScheduledTask"
        )
    if (task.prompt is None) == (task.handler is None):
        raise ScheduleDeclarationError(
            task_id, task.schedule, "give exactly one of prompt or handler"
        )
    if task.handler is not None and not callable(task.handler):
        raise ScheduleDeclarationError(task_id, task.schedule, "handler is not callable")
    if isinstance(task.retry, bool) or not isinstance(task.retry, int) or task.retry < 0:
        raise ScheduleDeclarationError(
            task_id, task.schedule, f"retry={task.retry!r} must be a whole number >= 0"
        )
    if task.conversation_id is not None and not ID.fullmatch(task.conversation_id):
        raise ScheduleDeclarationError(
            task_id, task.schedule, f"conversation_id {task.conversation_id!r} is not a valid id"
        )
    if task.prompt is not None and task.conversation_id is None and not ID.fullmatch(task_id):
        raise ScheduleDeclarationError(
            task_id,
            task.schedule,
            "the task id is not a valid conversation id: set conversation_id",
        )
    if not isinstance(task.schedule, str):
        raise ScheduleDeclarationError(task_id, repr(task.schedule), "schedule must be a string")
    return parse_schedule(task_id, task.schedule, task.timezone or default_timezone)


def arm(
    agent: Think,
    task_queue: str,
    *,
    tenant: str | None = None,
    conversation_id: str | None = None,
) -> list[ArmedTask]:
    """The agent instance's declared tasks, checked (raises `ScheduleDeclarationError`)."""
    declared: Mapping[str, object] = agent.get_scheduled_tasks()
    armed = []
    for task_id, task in declared.items():
        parsed = check_task(task_id, task, agent.get_default_timezone())
        assert isinstance(task, ScheduledTask)  # check_task refused anything else
        ref = ScheduleRef(task_queue, agent.name, task_id, tenant, conversation_id)
        armed.append(ArmedTask(ref, task, parsed))
    return armed


def find_task(agent: Think, task_id: str) -> ScheduledTask | None:
    found = agent.get_scheduled_tasks().get(task_id)
    return found if isinstance(found, ScheduledTask) else None


async def our_schedule_ids(client: Client, task_queue: str, agent: str) -> list[str]:
    """Every schedule of `agent` on this task queue, both scopes (Temporal's visibility
    store: a schedule created a moment ago may not be listed yet)."""
    prefix = agent_prefix(task_queue, agent)
    listed = await client.list_schedules()
    return [entry.id async for entry in listed if entry.id.startswith(prefix)]


async def reconcile(
    client: Client,
    armed: Iterable[ArmedTask],
    existing: Iterable[str],
    owns: Callable[[ScheduleRef], bool],
) -> None:
    """Create or update each of `armed`; delete the schedules in `existing` that `owns`
    claims (this agent's scope, or this conversation) and that are no longer declared."""
    wanted = {a.ref.schedule_id: a for a in armed}
    for task in wanted.values():
        await _create_or_update(client, task)
    for schedule_id in existing:
        ref = ScheduleRef.parse(schedule_id)
        if schedule_id in wanted or ref is None or not owns(ref):
            continue
        try:
            await client.get_schedule_handle(schedule_id).delete()
        except RPCError as error:
            if error.status != RPCStatusCode.NOT_FOUND:
                raise


async def _create_or_update(client: Client, task: ArmedTask) -> None:
    schedule = task.schedule()
    try:
        await client.create_schedule(task.ref.schedule_id, schedule)
        return
    except ScheduleAlreadyRunningError:
        pass

    def updated(current: ScheduleUpdateInput) -> ScheduleUpdate:
        # Keep what an operator set (paused, its note) while the declaration wins the rest.
        schedule.state = current.description.schedule.state
        return ScheduleUpdate(schedule=schedule)

    await _retrying(lambda: client.get_schedule_handle(task.ref.schedule_id).update(updated))


async def _retrying(call: Callable[[], Awaitable[Any]]) -> None:
    """Another worker's update in between makes ours fail its conflict check: read again."""
    for attempt in range(_CONFLICT_RETRIES):
        try:
            await call()
            return
        except RPCError as error:
            retryable = error.status in (RPCStatusCode.FAILED_PRECONDITION, RPCStatusCode.ABORTED)
            if not retryable or attempt == _CONFLICT_RETRIES - 1:
                raise
