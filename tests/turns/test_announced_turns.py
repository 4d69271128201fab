"""A turn a gateway starts in its admission is announced to the workers of its queue, and a
worker sends its workflow's start, eagerly: Temporal answers the start with the first workflow
task, which that worker runs at once (`think.engine._eager_start`). The test process runs no
worker, so its admissions announce, as a gateway's do. One worker of those told starts the
turn (`Store.claim_start`); a turn no worker takes is started by its admitting process after
`ANNOUNCED_GRACE`; a turn whose commit failed was never announced. The sweeper starts only
the turns admitted for its own queue."""

from __future__ import annotations

import asyncio
import secrets
from typing import Any

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine
from temporalio.client import WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode

from tests._turn_helpers import CommitFailed, fail_admissions, pending_turn, stored_rows
from think import ThinkService
from think._messages import UIMessage
from think.storage import Admission, TurnRecord, TurnRequest
from think.testing import FakeOpenAIServer, text
from think.turns._dispatch import ANNOUNCED_GRACE
from think.workflows.names import turn_workflow_id


def _handle(service: ThinkService, turn: TurnRecord | Admission) -> Any:
    record = turn.turn if isinstance(turn, Admission) else turn
    return service.temporal.get_workflow_handle(
        turn_workflow_id(record.agent, record.conversation_id, record.id, tenant=record.tenant)
    )


async def test_a_gateways_turn_is_started_by_a_worker_that_runs_its_first_task_at_once(
    service: ThinkService, fake_model: FakeOpenAIServer, cid: str
) -> None:
    fake_model.script(cid, text("hello from the worker"))
    result = await asyncio.wait_for(service.conversation("helper", cid).run_turn("hi"), 30)
    assert result.status == "completed"
    stored = await service.store.get_turn(result.turn_id)
    assert stored is not None and stored.fences.get("starter") == 1  # a worker took it
    history = await _handle(service, stored).fetch_history()
    started = history.events[0].workflow_execution_started_event_attributes
    assert started.identity != service.temporal.identity  # not this process's start
    # Eager: the first task was started by the start itself, in the same write (the task
    # ids of started, task scheduled and task started follow one another); a dispatched
    # task is started later, by a poll.
    scheduled, task_started = history.events[1], history.events[2]
    assert scheduled.HasField("workflow_task_scheduled_event_attributes")
    assert task_started.HasField("workflow_task_started_event_attributes")
    assert task_started.task_id == history.events[0].task_id + 2


async def test_a_turn_only_one_worker_may_start(
    service: ThinkService, engine: AsyncEngine, cid: str
) -> None:
    turn = await pending_turn(service, cid)  # started by its admission, never announced
    claimed = await service.store.claim_start(turn.id)
    assert claimed is not None and claimed.id == turn.id and claimed.fences == {"starter": 1}
    assert await service.store.claim_start(turn.id) is None  # the second worker told
    assert await service.store.awaiting_workflow([turn.id]) == {turn.id}  # not yet begun
    assert (await stored_rows(engine, cid)).turns == 1


async def test_a_turn_no_worker_takes_is_started_by_its_gateway(
    service: ThinkService, monkeypatch: pytest.MonkeyPatch, cid: str
) -> None:
    # Shorter than the age at which the stack's sweeper (every second) would start it.
    monkeypatch.setattr("think.turns._dispatch.ANNOUNCED_GRACE", 0.3)
    # A queue nobody polls or listens to: the announcement reaches no worker.
    queue = f"nobody-{secrets.token_hex(4)}"
    alone = ThinkService(
        store=service.store,
        temporal=service.temporal,
        settings=service.settings.model_copy(update={"task_queue": queue}),
        registry=service.registry,
    )
    submission = await alone.conversation("helper", cid).run_turn("hi", mode="submit")
    turn = await service.store.get_turn(submission.turn_id)
    assert turn is not None
    handle = _handle(service, turn)
    with pytest.raises(RPCError) as not_yet:
        await handle.describe()
    assert not_yet.value.status == RPCStatusCode.NOT_FOUND
    description = None
    for _ in range(30):
        await asyncio.sleep(0.1)
        try:
            description = await handle.describe()
            break
        except RPCError:
            continue
    assert description is not None, "its gateway did not start it"
    try:
        assert description.status == WorkflowExecutionStatus.RUNNING
        assert description.task_queue == queue
        stored = await service.store.get_turn(turn.id)
        assert stored is not None and "starter" not in stored.fences
    finally:
        await handle.terminate(reason="test over")


async def test_a_turn_whose_commit_failed_is_never_announced_or_started(
    service: ThinkService, engine: AsyncEngine, monkeypatch: pytest.MonkeyPatch, cid: str
) -> None:
    seen = fail_admissions(service, monkeypatch)
    with pytest.raises(CommitFailed):
        await service.conversation("helper", cid).submit_messages("hello")
    [admission] = seen
    assert admission.announced
    await asyncio.sleep(ANNOUNCED_GRACE + 1.5)
    with pytest.raises(RPCError) as missing:
        await _handle(service, admission).describe()
    assert missing.value.status == RPCStatusCode.NOT_FOUND
    rows = await stored_rows(engine, cid)
    assert rows.turns == rows.messages == 0


async def test_the_sweeper_keeps_a_turn_on_the_queue_it_was_admitted_for(
    service: ThinkService, cid: str
) -> None:
    elsewhere = f"elsewhere-{secrets.token_hex(4)}"
    admission = await service.store.admit_turn(
        tenant="default",
        agent="helper",
        conversation_id=cid,
        request=TurnRequest(messages=[UIMessage.user_text("hi")]),
        request_hash=f"swept-{cid}",
        idempotency_key=None,
        task_queue=elsewhere,  # recorded, not started: as if its gateway had died
    )
    turn = admission.turn
    assert turn.task_queue == elsewhere and turn.awaits_workflow

    async def swept_by(queue: str | None) -> bool:
        return turn.id in {t.id for t in await service.store.waiting_heads(0, queue)}

    assert await swept_by(elsewhere)
    assert not await swept_by(service.settings.task_queue)  # this stack's workers leave it
    assert await swept_by(None)
    # The stack's own sweeper (every second) has left it too: it still awaits its workflow.
    await asyncio.sleep(2.5)
    stored = await service.store.get_turn(turn.id)
    assert stored is not None and stored.awaits_workflow
    with pytest.raises(RPCError) as missing:
        await _handle(service, stored).describe()
    assert missing.value.status == RPCStatusCode.NOT_FOUND
