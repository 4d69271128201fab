"""The retention sweep (issue 37) on a worker and gateway of their own, configured with
`THINK_TURN_RETENTION_DAYS=30` and `THINK_CONVERSATION_RETENTION_DAYS=90`, and agents that
override them. Age is made by moving a conversation's timestamps back in Postgres; the sweep
is the workflow the schedule starts, run on the stack's own worker."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from sqlalchemy import text as sql
from sqlalchemy.ext.asyncio import AsyncEngine
from temporalio.client import Client, ScheduleIntervalSpec

from tests._replay import replayed
from tests._stack import Stack, own_stack
from tests._turn_helpers import wait_turn
from think.retention import SWEEP_WORKFLOW, SweepInput, SweepResult, sweep_schedule_id
from think.testing import FakeOpenAIServer

pytestmark = pytest.mark.stack

QUEUE = f"think-retention-{secrets.token_hex(3)}"


@pytest.fixture(scope="module")
def retention_stack(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    env = {
        **stack.env,
        "THINK_TASK_QUEUE": QUEUE,
        "THINK_AGENTS": "tests.agents:Helper,tests.retention_agents:KeptForever,"
        "tests.retention_agents:ShortLived",
        "THINK_TURN_RETENTION_DAYS": "30",
        "THINK_CONVERSATION_RETENTION_DAYS": "90",
        "THINK_RETENTION_SWEEP_SECONDS": "600",
    }
    with own_stack(env, tmp_path_factory.mktemp("retention")) as own:
        yield own


@pytest.fixture
async def api(retention_stack: Stack) -> Any:
    async with httpx.AsyncClient(base_url=retention_stack.api_url, timeout=60) as client:
        yield client


async def _sweep(temporal: Client) -> SweepResult:
    """One sweep, as the schedule starts it, to its end; its history replays (and is
    recorded as tests/histories/retention-sweep.json with THINK_RECORD_HISTORIES=1)."""
    handle = await temporal.start_workflow(
        SWEEP_WORKFLOW,
        SweepInput(batch=2),  # small batches: the batching is exercised too
        id=f"test-sweep-{secrets.token_hex(4)}",
        task_queue=QUEUE,
        result_type=SweepResult,
    )
    result = await handle.result()
    await replayed(handle, "retention-sweep")
    return result


async def _uid(engine: AsyncEngine, agent: str, cid: str) -> str:
    async with engine.connect() as conn:
        found = await conn.execute(
            sql("SELECT uid FROM conversations WHERE agent = :a AND id = :c"),
            {"a": agent, "c": cid},
        )
        return str(found.scalar_one())


async def _age_turns(engine: AsyncEngine, uid: str, days: float) -> None:
    async with engine.begin() as conn:
        await conn.execute(
            sql(
                "UPDATE turns SET created_at = created_at - make_interval(days => :d), "
                "completed_at = completed_at - make_interval(days => :d) "
                "WHERE conversation_uid = :u"
            ),
            {"d": days, "u": uid},
        )


async def _age_conversation(engine: AsyncEngine, uid: str, days: float) -> None:
    await _age_turns(engine, uid, days)
    async with engine.begin() as conn:
        for table, column in (
            ("conversations", "created_at"),
            ("messages", "created_at"),
            ("workspace_files", "updated_at"),
        ):
            key = "uid" if table == "conversations" else "conversation_uid"
            await conn.execute(
                sql(
                    f"UPDATE {table} SET {column} = {column} - make_interval(days => :d) "
                    f"WHERE {key} = :u"
                ),
                {"d": days, "u": uid},
            )


async def _count(engine: AsyncEngine, query: str, **params: Any) -> int:
    async with engine.connect() as conn:
        return int((await conn.execute(sql(query), params)).scalar_one())


async def test_the_schedule_is_armed_with_the_period(
    retention_stack: Stack, temporal: Client
) -> None:
    described = await temporal.get_schedule_handle(sweep_schedule_id(QUEUE)).describe()
    [interval] = described.schedule.spec.intervals
    assert isinstance(interval, ScheduleIntervalSpec)
    assert interval.every == timedelta(seconds=600)
    # Triggered, it starts a sweep on the deployment's workers, which completes.
    await temporal.get_schedule_handle(sweep_schedule_id(QUEUE)).trigger()
    query = (
        f"WorkflowId STARTS_WITH '{sweep_schedule_id(QUEUE)}-' AND ExecutionStatus = 'Completed'"
    )
    for _ in range(300):
        if [w async for w in temporal.list_workflows(query)]:
            break
        await asyncio.sleep(0.1)
    else:
        raise AssertionError("the triggered sweep did not complete")


async def test_expired_turn_records_go_with_their_streams_and_their_usage_stays(
    api: httpx.AsyncClient, engine: AsyncEngine, temporal: Client, fake_model: FakeOpenAIServer
) -> None:
    old, recent, kept, short = (f"c-{secrets.token_hex(6)}" for _ in range(4))
    for agent, cid in (("helper", old), ("helper", recent), ("kept_forever", kept)):
        for _ in range(3):
            await wait_turn(api, agent, cid, "hi", status="completed")
    await wait_turn(api, "short_lived", short, "hi", status="completed")
    old_uid = await _uid(engine, "helper", old)
    await _age_turns(engine, old_uid, 31)
    await _age_turns(engine, await _uid(engine, "kept_forever", kept), 400)
    await _age_turns(engine, await _uid(engine, "short_lived", short), 2)  # its own: 1 day
    window = {"since": (datetime.now(UTC) - timedelta(days=60)).isoformat(), "group_by": "agent"}
    usage_before = (await api.get("/v1/usage", params=window)).json()
    old_usage = (await api.get(f"/v1/agents/helper/conversations/{old}/usage")).json()
    assert old_usage["turns"] == 3 and old_usage["output_tokens"] > 0
    async with engine.connect() as conn:
        found = await conn.execute(
            sql("SELECT id FROM turns WHERE conversation_uid = :u"), {"u": old_uid}
        )
        old_ids = [r[0] for r in found]
    assert len(old_ids) == 3
    old_turns = "SELECT count(*) FROM turns WHERE conversation_uid = :u"

    result = await _sweep(temporal)

    assert result.turns == 4 and result.conversations == 0
    assert await _count(engine, old_turns, u=old_uid) == 0
    listed = (await api.get(f"/v1/agents/helper/conversations/{old}/turns")).json()["turns"]
    assert listed == []
    # The messages stay: only the turn records go.
    messages = (await api.get(f"/v1/agents/helper/conversations/{old}/messages")).json()
    assert [m["role"] for m in messages["messages"]] == ["user", "assistant"] * 3
    # Usage reads the same, for the conversation and for the tenant.
    assert (await api.get(f"/v1/agents/helper/conversations/{old}/usage")).json() == old_usage
    assert (await api.get("/v1/usage", params=window)).json() == usage_before
    # What is recent, or kept forever by its agent, stays; a shorter own retention applies.
    for agent, cid, turns in (
        ("helper", recent, 3),
        ("kept_forever", kept, 3),
        ("short_lived", short, 0),
    ):
        listed = (await api.get(f"/v1/agents/{agent}/conversations/{cid}/turns")).json()["turns"]
        assert len(listed) == turns, (agent, listed)
    # Idempotent: a second sweep finds nothing more.
    assert await _sweep(temporal) == SweepResult()
    chunks = "SELECT count(*) FROM stream_chunks WHERE turn_id = ANY(:ids)"
    assert await _count(engine, chunks, ids=old_ids) == 0


async def test_idle_conversations_go_with_everything_they_own(
    api: httpx.AsyncClient, engine: AsyncEngine, temporal: Client
) -> None:
    idle, active, kept = (f"c-{secrets.token_hex(6)}" for _ in range(3))
    for agent, cid in (("helper", idle), ("helper", active), ("kept_forever", kept)):
        await wait_turn(api, agent, cid, "hi", status="completed")
    idle_uid = await _uid(engine, "helper", idle)
    active_uid = await _uid(engine, "helper", active)
    await _age_conversation(engine, idle_uid, 100)
    await _age_conversation(engine, active_uid, 100)
    await _age_conversation(engine, await _uid(engine, "kept_forever", kept), 1000)
    # A message added a moment ago keeps `active` alive.
    added = await api.post(
        f"/v1/agents/helper/conversations/{active}/messages",
        json={
            "messages": [
                {
                    "id": f"m-{secrets.token_hex(4)}",
                    "role": "user",
                    "parts": [{"type": "text", "text": "still here"}],
                }
            ]
        },
    )
    assert added.status_code in (200, 201), added.text

    result = await _sweep(temporal)

    assert result.conversations >= 1
    assert (await api.get(f"/v1/agents/helper/conversations/{idle}")).status_code == 404
    for table in ("messages", "turns", "model_calls", "context_blocks"):
        assert (
            await _count(
                engine, f"SELECT count(*) FROM {table} WHERE conversation_uid = :u", u=idle_uid
            )
            == 0
        ), table
    assert (await api.get(f"/v1/agents/helper/conversations/{active}")).status_code == 200
    assert (await api.get(f"/v1/agents/kept_forever/conversations/{kept}")).status_code == 200
