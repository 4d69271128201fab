"""What the worker, the gateway and the CLI do with schedules: arm a deployment's tasks at
worker start, list them with their next runs and last result, trigger one now."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import datetime
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel
from temporalio.api.common.v1 import Payload
from temporalio.client import (
    Client,
    ScheduleActionExecutionStartWorkflow,
    ScheduleActionStartWorkflow,
    ScheduleDescription,
)
from temporalio.client import ScheduleOverlapPolicy as Overlap
from temporalio.service import RPCError, RPCStatusCode

from think.exceptions import UserError
from think.schedules._inputs import OccurrenceInput
from think.schedules._names import ScheduleRef
from think.schedules._reconcile import arm, our_schedule_ids, reconcile

if TYPE_CHECKING:
    from think.agent import Think
    from think.turns import ThinkService

log = logging.getLogger("think.schedules")


class ScheduleNotFound(UserError):
    """No such task for this agent (and tenant, and conversation): a 404 over HTTP."""

    def __init__(self, agent: str, task: str, conversation_id: str | None = None) -> None:
        where = f" in conversation {conversation_id!r}" if conversation_id else ""
        super().__init__(f"agent {agent!r} has no scheduled task {task!r}{where}")


class ScheduleSummary(BaseModel):
    """One armed task as `GET /v1/agents/{agent}/schedules` and `think schedules` show it."""

    task: str
    schedule: str
    timezone: str | None
    kind: Literal["prompt", "handler"]
    schedule_kind: str
    conversation_id: str | None
    """Where a prompt task's turns land; for a handler, the conversation of its scope."""
    schedule_id: str
    paused: bool
    next_runs: list[datetime]
    last_result: str | None
    """The last occurrence's workflow status (`completed`, `failed`, `running`, ...)."""


def check_deployment(task_queue: str, agents: Iterable[type[Think]]) -> int:
    """Check every agent-scope declaration of `agents` without touching Temporal, so a worker
    refuses a bad one before it connects to anything; returns how many tasks there are.
    Raises `ScheduleDeclarationError`."""
    agent_scope = (cls() for cls in agents)
    return sum(
        len(arm(agent, task_queue))
        for agent in agent_scope
        if agent.get_scheduled_tasks_scope() == "agent"
    )


async def reconcile_deployment(
    client: Client, task_queue: str, agents: Iterable[type[Think]]
) -> int:
    """Arm every agent-scope task of `agents` and delete the agent-scope schedules no longer
    declared; returns how many tasks are armed. All declarations are checked before any
    schedule changes, so a bad one leaves Temporal as it was."""
    plans = []
    for cls in agents:
        agent = cls()
        if agent.get_scheduled_tasks_scope() == "agent":
            plans.append((cls.name, arm(agent, task_queue)))
    for name, armed in plans:
        existing = await our_schedule_ids(client, task_queue, name)
        await reconcile(client, armed, existing, lambda ref: ref.conversation_id is None)
    return sum(len(armed) for _, armed in plans)


async def reconcile_conversations(service: ThinkService) -> int:
    """Re-apply the tasks of every conversation that has schedules, for the agents of
    conversation scope, as a deploy may have changed what they declare. A conversation whose
    declaration cannot be armed is logged and left as it is: its data, not the code, is at
    fault, and it must not keep every worker from starting."""
    armed = 0
    for cls in service.registry:
        if cls().get_scheduled_tasks_scope() != "conversation":
            continue
        refs = [
            ScheduleRef.parse(i)
            for i in await our_schedule_ids(service.temporal, service.settings.task_queue, cls.name)
        ]
        owners = {
            (r.tenant or "default", r.conversation_id) for r in refs if r and r.conversation_id
        }
        for tenant, conversation_id in sorted(owners):
            handle = service.conversation(cls, conversation_id, tenant=tenant)
            try:
                armed += await handle.reconcile_scheduled_tasks()
            except UserError as error:
                log.warning("conversation %s of %s: %s", conversation_id, cls.name, error)
    return armed


async def reconcile_conversation(
    client: Client, task_queue: str, agent: Think, tenant: str, conversation_id: str
) -> int:
    """Arm `agent`'s tasks (its instance bound to the conversation's configuration) for
    this conversation, deleting its ones no longer declared."""
    armed = arm(agent, task_queue, tenant=tenant, conversation_id=conversation_id)
    existing = await our_schedule_ids(client, task_queue, agent.name)

    def owns(ref: ScheduleRef) -> bool:
        return ref.conversation_id == conversation_id and ref.tenant == tenant

    await reconcile(client, armed, existing, owns)
    return len(armed)


async def delete_conversation_schedules(
    client: Client, task_queue: str, agent: Think, tenant: str, conversation_id: str
) -> None:
    """Delete this conversation's schedules (conversation scope), as deleting the conversation
    does: the ones Temporal lists, and, for an agent of conversation scope, the ones it
    declares for the conversation (`agent` bound to the conversation's configuration), since
    visibility may not list one created a moment ago. Agent-scope schedules are the agent's,
    even one whose prompt lands in this conversation: they stay."""
    ids = set(await our_schedule_ids(client, task_queue, agent.name))
    try:
        if agent.get_scheduled_tasks_scope() == "conversation":
            armed = arm(agent, task_queue, tenant=tenant, conversation_id=conversation_id)
            ids.update(task.ref.schedule_id for task in armed)
    except Exception:
        # The agent's own code failed (or declares what it can no longer arm): the listed
        # schedules are deleted all the same, and the conversation must not stay for its sake.
        log.warning(
            "agent %s: the scheduled tasks of conversation %s could not be evaluated; "
            "deleting the listed ones",
            agent.name,
            conversation_id,
            exc_info=True,
        )

    def owns(ref: ScheduleRef) -> bool:
        return ref.conversation_id == conversation_id and ref.tenant == tenant

    await reconcile(client, [], sorted(ids), owns)


async def list_schedules(
    client: Client, task_queue: str, cls: type[Think], tenant: str
) -> list[ScheduleSummary]:
    ids = set(await our_schedule_ids(client, task_queue, cls.name))
    agent = cls()
    if agent.get_scheduled_tasks_scope() == "agent":
        # Declared ones by id too: visibility may not list a schedule created a moment ago.
        try:
            ids.update(t.ref.schedule_id for t in arm(agent, task_queue))
        except UserError:
            log.warning("agent %s declares a task it cannot arm", cls.name, exc_info=True)
    found = []
    for schedule_id in sorted(ids):
        described = await _describe(client, schedule_id)
        if described is None:
            continue
        desc, occ = described
        if occ.tenant == tenant:
            found.append(await _summary(client, desc, occ))
    return found


async def trigger(
    client: Client,
    task_queue: str,
    cls: type[Think],
    task: str,
    tenant: str,
    conversation_id: str | None = None,
) -> str:
    """Run one occurrence now, whatever the overlap policy says (an explicit request);
    returns the schedule's id."""
    ref = ScheduleRef(task_queue, cls.name, task, tenant, conversation_id)
    described = await _describe(client, ref.schedule_id)
    if described is None or described[1].tenant != tenant:
        raise ScheduleNotFound(cls.name, task, conversation_id)
    await client.get_schedule_handle(ref.schedule_id).trigger(overlap=Overlap.ALLOW_ALL)
    return ref.schedule_id


async def _describe(
    client: Client, schedule_id: str
) -> tuple[ScheduleDescription, OccurrenceInput] | None:
    try:
        desc = await client.get_schedule_handle(schedule_id).describe()
    except RPCError as error:
        if error.status == RPCStatusCode.NOT_FOUND:
            return None
        raise
    action = desc.schedule.action
    if not isinstance(action, ScheduleActionStartWorkflow) or not action.args:
        return None
    payloads = [a for a in action.args if isinstance(a, Payload)]
    [occ] = await client.data_converter.decode(payloads, [OccurrenceInput])
    return desc, occ


async def _summary(
    client: Client, desc: ScheduleDescription, occ: OccurrenceInput
) -> ScheduleSummary:
    last: str | None = None
    recent = desc.info.recent_actions
    execution = recent[-1].action if recent else None
    if isinstance(execution, ScheduleActionExecutionStartWorkflow):
        try:
            wf = await client.get_workflow_handle(
                execution.workflow_id, run_id=execution.first_execution_run_id
            ).describe()
            last = wf.status.name.lower() if wf.status is not None else None
        except RPCError:
            last = "unknown"  # past Temporal's retention
    return ScheduleSummary(
        task=occ.task,
        schedule=occ.schedule,
        timezone=occ.timezone,
        kind=occ.action,
        schedule_kind=occ.kind,
        conversation_id=occ.target_conversation_id or occ.conversation_id,
        schedule_id=occ.schedule_id,
        paused=desc.schedule.state.paused,
        next_runs=list(desc.info.next_action_times),
        last_result=last,
    )
