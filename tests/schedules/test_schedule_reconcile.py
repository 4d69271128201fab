"""Reconcile at worker start with two workers at once (create, update, delete, nothing
doubled, an operator's pause kept), no backfill after an outage, and Temporal following the
clock change of a calendar spec's timezone."""

from __future__ import annotations

import asyncio
import dataclasses
import secrets
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest
from temporalio.client import (
    Client,
    Schedule,
    ScheduleActionExecutionStartWorkflow,
    ScheduleActionStartWorkflow,
    ScheduleCalendarSpec,
    ScheduleInfo,
    ScheduleState,
)
from temporalio.service import RPCError, RPCStatusCode

from tests._schedules import Deployment, delete_schedules, deployment, schedule_ids
from tests._stack import Stack
from tests._waits import eventually
from tests.schedule_agents import FAR_DAY
from think.schedules import CATCHUP_WINDOW, OVERLAP, ScheduleRef
from think.schedules._dsl import parse_schedule

V1 = f"a=every week on {FAR_DAY} at 03:00;b=every week on {FAR_DAY} at 04:00"
V2 = f"b=every week on {FAR_DAY} at 05:00 in Asia/Tokyo;c=every week on {FAR_DAY} at 06:00"


@pytest.fixture(scope="module")
async def churn(
    stack: Stack, temporal: Client, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Deployment]:
    dep = deployment(stack, tmp_path_factory.mktemp("churn"), "tests.schedule_agents:Churn")
    try:
        yield dep
    finally:
        dep.stack.stop()
        await delete_schedules(temporal, dep.queue, "sched_churn")
        for task in "abc":
            with _gone():
                await temporal.get_schedule_handle(_id(dep, task)).delete()


class _gone:
    """Suppress NOT_FOUND: the schedule is already deleted."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: object, error: BaseException | None, tb: object) -> bool:
        return isinstance(error, RPCError) and error.status == RPCStatusCode.NOT_FOUND


def _id(dep: Deployment, task: str) -> str:
    return ScheduleRef(dep.queue, "sched_churn", task).schedule_id


async def _start_two(dep: Deployment, tasks: str) -> None:
    """Two workers of the same deploy starting at once, until both poll (reconciled)."""
    dep.stack.env["THINK_TEST_TASKS"] = tasks
    workers = [dep.stack.start_worker(), dep.stack.start_worker()]
    await asyncio.gather(*(asyncio.to_thread(dep.stack.wait_polling, w) for w in workers))


def _stop_all(dep: Deployment) -> None:
    dep.stack.stop()
    dep.stack.processes.clear()


async def _listed(temporal: Client, dep: Deployment, want: set[str]) -> set[str] | None:
    found = await schedule_ids(temporal, dep.queue, "sched_churn")
    return found if found == {_id(dep, t) for t in want} else None


async def test_two_workers_reconcile_create_update_delete(
    churn: Deployment, temporal: Client
) -> None:
    await _start_two(churn, V1)
    assert await eventually(lambda: _listed(temporal, churn, {"a", "b"}))
    b = temporal.get_schedule_handle(_id(churn, "b"))
    assert [r.start for r in (await b.describe()).schedule.spec.calendars[0].hour] == [4]
    await b.pause(note="paused by an operator")
    _stop_all(churn)

    await _start_two(churn, V2)  # the next deploy: a removed, b changed, c new
    assert await eventually(lambda: _listed(temporal, churn, {"b", "c"}))
    with pytest.raises(RPCError) as gone:
        await temporal.get_schedule_handle(_id(churn, "a")).describe()
    assert gone.value.status == RPCStatusCode.NOT_FOUND
    changed = (await b.describe()).schedule
    assert [r.start for r in changed.spec.calendars[0].hour] == [5]
    assert changed.spec.time_zone_name == "Asia/Tokyo"
    assert changed.state.paused and changed.state.note == "paused by an operator"
    _stop_all(churn)


async def test_late_occurrence_runs_once_and_is_not_backfilled(
    churn: Deployment, temporal: Client
) -> None:
    """All workers down: occurrences that come meanwhile find the first one still waiting
    (overlap SKIP) and are dropped; when a worker returns, that one runs, once."""
    _stop_all(churn)
    churn.stack.env["THINK_TEST_TASKS"] = V2
    c = temporal.get_schedule_handle(_id(churn, "c"))
    desc = await c.describe()
    assert desc.schedule.policy.overlap == OVERLAP
    assert desc.schedule.policy.catchup_window == CATCHUP_WINDOW
    for _ in range(3):  # occurrences while no worker runs
        await c.trigger()

    last: list[ScheduleInfo] = []

    async def one_started_others_skipped() -> ScheduleInfo | None:
        # Triggers are applied asynchronously, and the scheduler may fold triggers that come
        # together into one: what matters is one start and no other, the rest skipped.
        last[:] = [(await c.describe()).info]
        skipped = last[0].num_actions_skipped_overlap
        return last[0] if last[0].num_actions == 1 and skipped >= 1 else None

    try:
        info = await eventually(one_started_others_skipped)
    except AssertionError as error:
        raise AssertionError(f"{error}: {last}") from None
    late = info.recent_actions[-1].action
    assert isinstance(late, ScheduleActionExecutionStartWorkflow)

    churn.stack.wait_polling(churn.stack.start_worker())
    handle = temporal.get_workflow_handle(late.workflow_id, run_id=late.first_execution_run_id)
    await asyncio.wait_for(handle.result(), 30)
    assert len(churn.runs("c")) == 1
    # Nothing else was started for c: the only run of the schedule is that one.
    assert (await c.describe()).info.num_actions == info.num_actions
    _stop_all(churn)


async def test_calendar_in_london_follows_the_clock_change(temporal: Client) -> None:
    """09:00 in London is 09:00 UTC before the change to summer time (28 March 2027) and
    08:00 UTC after it: the spec's timezone, evaluated by Temporal itself."""
    parsed = parse_schedule("t", "every day at 09:00 in Europe/London")
    spec = dataclasses.replace(parsed.spec, start_at=datetime(2027, 3, 26, 12, tzinfo=UTC))
    schedule_id = f"test-dst-{secrets.token_hex(4)}"
    handle = await temporal.create_schedule(
        schedule_id,
        Schedule(
            action=ScheduleActionStartWorkflow("none", id="none", task_queue="none"),
            spec=spec,
            state=ScheduleState(paused=True),
        ),
    )
    try:
        times = (await handle.describe()).info.next_action_times[:3]
    finally:
        await handle.delete()
    assert times == [
        datetime(2027, 3, 27, 9, 0, tzinfo=UTC),
        datetime(2027, 3, 28, 8, 0, tzinfo=UTC),
        datetime(2027, 3, 29, 8, 0, tzinfo=UTC),
    ]
    assert isinstance(parsed.spec.calendars[0], ScheduleCalendarSpec)
