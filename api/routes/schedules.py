"""`GET /v1/agents/{agent}/schedules` and `POST .../schedules/{task}/trigger`.

A schedule belongs to the tenant of the conversation it runs in: an agent's own tasks to the
deployment's `default` tenant, a conversation's to that conversation's. Another tenant does
not see it, and triggering it answers 404, as for conversations.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query

from api.deps import AgentClass, Res, Tenant
from api.schemas import ID_PATTERN, ScheduleOut, SchedulesOut, TriggeredOut
from think.server import list_schedules, trigger

router = APIRouter(tags=["schedules"])


@router.get("/v1/agents/{agent}/schedules", response_model=SchedulesOut)
async def get_schedules(res: Res, tenant: Tenant, agent: AgentClass) -> SchedulesOut:
    found = await list_schedules(res.temporal, res.settings.task_queue, agent, tenant)
    return SchedulesOut(schedules=[ScheduleOut.model_validate(s.model_dump()) for s in found])


@router.post(
    "/v1/agents/{agent}/schedules/{task}/trigger",
    response_model=TriggeredOut,
    status_code=202,
)
async def trigger_schedule(
    res: Res,
    tenant: Tenant,
    agent: AgentClass,
    task: Annotated[str, Path(description="The task id, as get_scheduled_tasks() names it")],
    conversation_id: Annotated[
        str | None,
        Query(pattern=ID_PATTERN, description="For conversation-scoped tasks: whose"),
    ] = None,
) -> TriggeredOut:
    queue = res.settings.task_queue
    schedule_id = await trigger(res.temporal, queue, agent, task, tenant, conversation_id)
    return TriggeredOut(task=task, schedule_id=schedule_id)
