"""A turn's workflow is started as its admission commits, not after (`think.turns._admission`),
where the admitting process runs a worker (a gateway's admissions announce their turns
instead: tests/turns/test_announced_turns.py): the workflow of a commit that failed ends by itself,
writing nothing, and a first step that
overtakes the commit waits for it instead of failing the turn. A turn to an idle conversation
is started by its admission's transaction itself (`starts_at_admission`): its first step then
only claims its fence, and a cancel that comes before that step aborts it at once."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from sqlalchemy import text as sql
from sqlalchemy.ext.asyncio import AsyncEngine

from tests._turn_helpers import (
    CommitFailed,
    chunk_types,
    fail_admissions,
    pending_turn,
    stored_rows,
)
from think import ThinkService
from think._messages import UIMessage
from think.storage import TurnRecord, TurnRequest
from think.testing import FakeOpenAIServer, text
from think.turns._dispatch import start_turn_workflow
from think.workflows.names import turn_workflow_id


def _workflow_id(turn: TurnRecord) -> str:
    return turn_workflow_id(turn.agent, turn.conversation_id, turn.id, tenant=turn.tenant)


async def _rows(engine: AsyncEngine, turn_id: str) -> int:
    async with engine.connect() as conn:
        found = await conn.execute(sql("SELECT count(*) FROM turns WHERE id = :t"), {"t": turn_id})
        return int(found.scalar_one())


async def test_the_workflow_of_a_failed_commit_ends_by_itself_and_writes_nothing(
    service: ThinkService, engine: AsyncEngine, monkeypatch: pytest.MonkeyPatch, cid: str
) -> None:
    # As a worker's admission (a sub-agent's turn) is: it starts the workflow itself.
    monkeypatch.setattr("think.turns._dispatch._HOSTED_QUEUES", {service.settings.task_queue})
    seen = fail_admissions(service, monkeypatch)  # the workflow's start is on its way
    with pytest.raises(CommitFailed):
        await service.conversation("helper", cid).submit_messages("hello")
    [turn] = [admission.turn for admission in seen]
    assert await _rows(engine, turn.id) == 0  # nothing was recorded
    handle = service.temporal.get_workflow_handle(_workflow_id(turn))
    # Its first step finds no turn, looks again for a while (about 15 s), and ends it.
    result = await asyncio.wait_for(handle.result(), timeout=60)
    assert result["status"] == "error"
    assert await _rows(engine, turn.id) == 0
    assert (await stored_rows(engine, cid)).messages == 0


async def test_a_first_step_that_overtakes_its_turns_commit_waits_for_it(
    service: ThinkService, engine: AsyncEngine, fake_model: FakeOpenAIServer, cid: str
) -> None:
    fake_model.script(cid, text("made it"))
    turn = await pending_turn(service, cid)
    hidden = f"{turn.id}-hidden"
    # Out of the step's sight, as a row not yet committed is: its workflow starts meanwhile.
    async with engine.begin() as conn:
        await conn.execute(
            sql("UPDATE turns SET id = :h WHERE id = :t"), {"h": hidden, "t": turn.id}
        )
    await start_turn_workflow(service.temporal, service.settings.task_queue, turn)
    await asyncio.sleep(0.3)
    async with engine.begin() as conn:
        await conn.execute(
            sql("UPDATE turns SET id = :t WHERE id = :h"), {"h": hidden, "t": turn.id}
        )
    handle = service.temporal.get_workflow_handle(_workflow_id(turn))
    result = await asyncio.wait_for(handle.result(), timeout=30)
    assert result["status"] == "completed"
    stored = await service.store.get_turn(turn.id)
    assert stored is not None and stored.status == "completed"
    assert stored.message is not None
    assert [p.get("text") for p in stored.message["parts"] if p["type"] == "text"] == ["made it"]


async def _admit(service: ThinkService, cid: str, **request: Any) -> TurnRecord:
    """Recorded as a gateway would, but with no workflow started (as if the gateway died)."""
    admission = await service.store.admit_turn(
        tenant="default",
        agent="helper",
        conversation_id=cid,
        request=TurnRequest(messages=[UIMessage.user_text("hi")], **request),
        request_hash=f"{cid}-{len(request)}",
        idempotency_key=None,
    )
    return admission.turn


async def test_a_turn_to_an_idle_conversation_starts_in_its_admission(
    service: ThinkService, engine: AsyncEngine, cid: str
) -> None:
    turn = await _admit(service, cid)
    stored = await service.store.get_turn(turn.id)
    assert stored is not None and stored.status == turn.status == "running"
    assert stored.started_at is not None and stored.parent_id is not None
    assert stored.awaits_workflow  # no step has claimed it: a sweeper may start its workflow
    assert await chunk_types(service, turn.id) == ["start"]
    assert (await stored_rows(engine, cid)).messages == 1  # "hi", under the active leaf
    # One queued behind it is started by whoever ends the turn ahead, as before.
    queued = await _admit(service, cid, concurrency="queue")
    assert queued.status == "pending" and await chunk_types(service, queued.id) == []
    assert (await stored_rows(engine, cid)).messages == 1


@pytest.mark.parametrize(
    "request_fields",
    [
        {"concurrency": "debounce", "debounce_seconds": 0.2},  # waits for quiet first
        {"continuation": True},  # may have nothing to continue
    ],
    ids=["debounce", "continuation"],
)
async def test_a_mode_with_work_at_its_start_is_left_to_its_first_step(
    service: ThinkService, engine: AsyncEngine, cid: str, request_fields: dict[str, Any]
) -> None:
    turn = await _admit(service, cid, **request_fields)
    assert turn.status == "pending" and turn.awaits_workflow
    assert await chunk_types(service, turn.id) == []
    assert (await stored_rows(engine, cid)).messages == 0


async def test_a_started_turn_cancelled_before_its_first_step_is_aborted_at_once(
    service: ThinkService, fake_model: FakeOpenAIServer, cid: str
) -> None:
    turn = await _admit(service, cid)
    conversation = service.conversation("helper", cid)
    assert await conversation.cancel_chat(turn.id, "changed my mind")
    stored = await service.store.get_turn(turn.id)
    assert stored is not None and stored.status == "aborted"
    assert stored.error == "changed my mind"
    assert await chunk_types(service, turn.id) == ["start", "abort"]
    # Never run, and the conversation goes on: the next turn answers at once.
    fake_model.script(cid, text("next"))
    result = await asyncio.wait_for(conversation.run_turn("again"), timeout=30)
    assert result.status == "completed"
    assert len(fake_model.requests(cid)) == 1
