"""The deployment's retention schedule, armed by every worker as it starts (as the agents'
scheduled tasks are): create or update `think-retention:<task queue>` when some retention is
configured (the deployment's or an agent's), delete it when none is. Workers racing to arm it
agree: a create that loses becomes an update, a delete of one already gone is done."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import timedelta
from typing import TYPE_CHECKING

from temporalio.client import (
    Client,
    Schedule,
    ScheduleActionStartWorkflow,
    ScheduleAlreadyRunningError,
    ScheduleIntervalSpec,
    ScheduleOverlapPolicy,
    SchedulePolicy,
    ScheduleSpec,
    ScheduleUpdate,
    ScheduleUpdateInput,
)
from temporalio.service import RPCError, RPCStatusCode

from think.retention._inputs import SweepInput
from think.retention._names import SWEEP_WORKFLOW, sweep_schedule_id
from think.retention._policy import retention_configured

if TYPE_CHECKING:
    from think._settings import Settings
    from think.agent import Think


def sweep_schedule(settings: Settings) -> Schedule:
    schedule_id = sweep_schedule_id(settings.task_queue)
    return Schedule(
        action=ScheduleActionStartWorkflow(
            SWEEP_WORKFLOW,
            SweepInput(),
            id=schedule_id,
            task_queue=settings.task_queue,
            static_summary="retention sweep: expired turn records and idle conversations",
        ),
        spec=ScheduleSpec(
            intervals=[
                ScheduleIntervalSpec(every=timedelta(seconds=settings.retention_sweep_seconds))
            ]
        ),
        # A sweep still running when the next is due makes that one skip: they would race
        # over the same rows.
        policy=SchedulePolicy(
            overlap=ScheduleOverlapPolicy.SKIP, catchup_window=timedelta(minutes=1)
        ),
    )


async def arm_retention(client: Client, settings: Settings, agents: Iterable[type[Think]]) -> bool:
    """Create, update or delete the retention schedule as the configuration says; whether it
    is armed."""
    schedule_id = sweep_schedule_id(settings.task_queue)
    handle = client.get_schedule_handle(schedule_id)
    if not retention_configured(settings, agents):
        try:
            await handle.delete()
        except RPCError as error:
            if error.status != RPCStatusCode.NOT_FOUND:
                raise
        return False
    schedule = sweep_schedule(settings)
    try:
        await client.create_schedule(schedule_id, schedule)
        return True
    except ScheduleAlreadyRunningError:
        pass

    def updated(current: ScheduleUpdateInput) -> ScheduleUpdate:
        schedule.state = current.description.schedule.state  # paused by an operator: stays
        return ScheduleUpdate(schedule=schedule)

    for attempt in range(5):
        try:
            await handle.update(updated)
            break
        except RPCError as error:
            conflict = error.status in (RPCStatusCode.FAILED_PRECONDITION, RPCStatusCode.ABORTED)
            if not conflict or attempt == 4:
                raise
    return True
