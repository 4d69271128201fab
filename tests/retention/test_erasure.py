"""A tenant's erasure, `DELETE /v1/tenant-data` (issue 37): everything the tenant owns goes,
in Postgres and in Temporal, and another tenant with data in every table keeps every row and
every workflow.

Two tenants of this module alone (the suite's Postgres and Temporal are shared), on a gateway
of their own with limits on (so the limits' tables hold rows of both); each gets real turns
(answered, one paused for an approval: a running workflow), and the rows the turns do not make
by themselves (a workspace file, a memory block, a summary, a side call, an MCP server, a
decision, a stream lease) are written beside them, and a conversation-scope schedule each."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest
from sqlalchemy import text as sql
from sqlalchemy.ext.asyncio import AsyncEngine
from temporalio.client import (
    Client,
    Schedule,
    ScheduleActionStartWorkflow,
    ScheduleSpec,
    ScheduleState,
)
from temporalio.service import RPCError, RPCStatusCode

from tests._replay import replayed
from tests._stack import Stack, bearer_client, extra_gateway
from tests._turn_helpers import wait_turn
from think.retention import EraseResult
from think.schedules import OCCURRENCE_WORKFLOW
from think.schedules._inputs import OccurrenceInput
from think.testing import FakeOpenAIServer, text, tool_call

pytestmark = pytest.mark.stack

RUN = secrets.token_hex(4)
GONE, KEPT = f"gone-{RUN}", f"kept-{RUN}"
KEYS = f"gone-key:{GONE},kept-key:{KEPT}"
DAILY = "0 3 * * *"


@pytest.fixture(scope="module")
def gateway(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    env = {
        **stack.env,
        "THINK_API_KEYS": KEYS,
        "THINK_SUBMISSIONS_PER_MINUTE": "6000",
        "THINK_MAX_STREAMS_PER_TENANT": "10",
    }
    with extra_gateway(env, tmp_path_factory.mktemp("erasure")) as url:
        yield url


@dataclass
class Owned:
    """What a tenant was given: its conversations' uids and its turns' ids."""

    tenant: str
    uids: list[str]
    turn_ids: list[str]
    schedule_id: str


TENANT_TABLES = ("conversations", "workspace_usage", "tenant_limits", "stream_leases")
TURN_TABLES = ("stream_chunks", "turn_answers")


def _where(table: str, columns: set[str]) -> str:
    """How a table's rows are found as a tenant's: by the tenant, its conversations or its
    turns. Every table of the schema has one (checked below), so a table added later fails
    this test until it says which rows are whose."""
    if "tenant" in columns:
        return "tenant = :tenant"
    if "conversation_uid" in columns:
        return "conversation_uid = ANY(:uids)"
    if "turn_id" in columns:
        return "turn_id = ANY(:turns)"
    raise AssertionError(f"table {table} names no tenant, conversation or turn")


async def _rows(engine: AsyncEngine, owned: Owned) -> dict[str, list[str]]:
    """Every row of the tenant in every table, as JSON text, by table."""
    found: dict[str, list[str]] = {}
    async with engine.connect() as conn:
        columns = await conn.execute(
            sql(
                "SELECT table_name, column_name FROM information_schema.columns "
                "WHERE table_schema = 'public' AND table_name <> 'alembic_version'"
            )
        )
        tables: dict[str, set[str]] = {}
        for table, column in columns:
            tables.setdefault(table, set()).add(column)
        for table, cols in sorted(tables.items()):
            rows = await conn.execute(
                sql(f"SELECT to_jsonb(t)::text FROM {table} t WHERE {_where(table, cols)}"),
                {"tenant": owned.tenant, "uids": owned.uids, "turns": owned.turn_ids},
            )
            found[table] = sorted(r[0] for r in rows)
    return found


async def _give(
    api: httpx.AsyncClient,
    engine: AsyncEngine,
    temporal: Client,
    fake_model: FakeOpenAIServer,
    tenant: str,
    queue: str,
) -> Owned:
    chat, paused = f"c-{secrets.token_hex(6)}", f"c-{secrets.token_hex(6)}"
    for _ in range(2):
        await wait_turn(api, "helper", chat, "hi", status="completed")
    fake_model.script(paused, tool_call("delete_file", {"path": "x"}, id="call_del"), text("ok"))
    await wait_turn(api, "gatekeeper", paused, "rm", status="awaiting_approval")
    async with engine.begin() as conn:
        uids = [
            r[0]
            for r in await conn.execute(
                sql("SELECT uid FROM conversations WHERE tenant = :t ORDER BY uid"), {"t": tenant}
            )
        ]
        turn_ids = [
            r[0]
            for r in await conn.execute(
                sql("SELECT id FROM turns WHERE conversation_uid = ANY(:u)"), {"u": uids}
            )
        ]
        uid, turn = uids[0], turn_ids[0]
        params = {"u": uid, "t": turn, "tenant": tenant, "lease": f"{tenant}:test"}
        for statement in (
            "INSERT INTO workspace_files (conversation_uid, path, data, media_type, size) "
            "VALUES (:u, 'notes.md', 'hello', 'text/markdown', 5)",
            "INSERT INTO workspace_ops (conversation_uid, key, result) VALUES (:u, 'op', '{}')",
            "INSERT INTO context_blocks (conversation_uid, label, content) "
            "VALUES (:u, 'memory', 'x')",
            "INSERT INTO compactions (conversation_uid, first_message_id, last_message_id, "
            "summary, tokens_before, tokens_after, trigger) "
            "VALUES (:u, 'a', 'b', 's', 2, 1, 'test')",
            "INSERT INTO model_calls (conversation_uid, turn_id, purpose, usage) "
            """VALUES (:u, :t, 'compaction', '{"model": "m", "input_tokens": 1}')""",
            "INSERT INTO conversation_mcp_servers (conversation_uid, name, spec) "
            "VALUES (:u, 'n', '{}')",
            "INSERT INTO turn_answers (turn_id, kind, key, answer) VALUES (:t, 'test', 'k', '{}')",
            "INSERT INTO stream_leases (id, tenant, expires_at) "
            "VALUES (:lease, :tenant, now() + interval '1 day')",
            "INSERT INTO action_ledger (id, tenant, agent, key, action, status, input, "
            "input_hash, conversation_id, result) VALUES (:lease, :tenant, 'refunder', "
            """'refund:1', 'refund', 'settled', '{"order_id": "1"}', 'h', :u, '{}')""",
            "INSERT INTO messenger_events (tenant, agent, messenger, event_id, turn_id, done) "
            "VALUES (:tenant, 'helper', 'telegram', '1', :t, true)",
            "INSERT INTO messenger_threads (tenant, agent, messenger, thread_key, chat, "
            "conversation_id) VALUES (:tenant, 'helper', 'telegram', '42', '42', :u)",
            "INSERT INTO messenger_deliveries (id, tenant, agent, messenger, conversation_id, "
            "turn_id, chat) VALUES (:lease, :tenant, 'helper', 'telegram', :u, :t, '42')",
            "INSERT INTO messenger_buttons (approval_id, delivery_id, turn_id) "
            "VALUES (:lease, :lease, :t)",
        ):
            await conn.execute(sql(statement), params)
    schedule_id = f"think-schedule:{queue}:helper:nightly:{tenant}:{chat}"
    await temporal.create_schedule(
        schedule_id,
        Schedule(
            action=ScheduleActionStartWorkflow(
                OCCURRENCE_WORKFLOW,
                # A task the agent does not declare: an occurrence is skipped, and closes.
                OccurrenceInput(
                    schedule_id=schedule_id,
                    agent="helper",
                    task="nightly",
                    tenant=tenant,
                    conversation_id=chat,
                ),
                id=schedule_id,
                task_queue=queue,
            ),
            spec=ScheduleSpec(cron_expressions=[DAILY]),
            state=ScheduleState(paused=True),
        ),
    )
    await temporal.get_schedule_handle(schedule_id).trigger()
    return Owned(tenant, uids, turn_ids, schedule_id)


async def _workflows(temporal: Client, tenant: str) -> list[str]:
    return sorted([w.id async for w in temporal.list_workflows(f"ThinkTenant = '{tenant}'")])


async def _occurrences(temporal: Client, owned: Owned, count: int) -> list[str]:
    """The occurrences of the tenant's schedule once visibility lists `count` of them."""
    query = f"WorkflowId STARTS_WITH '{owned.schedule_id}-' AND ExecutionStatus = 'Completed'"
    found: list[str] = []
    for _ in range(200):
        found = sorted([w.id async for w in temporal.list_workflows(query)])
        if len(found) == count:
            return found
        await asyncio.sleep(0.1)
    raise AssertionError(f"schedule {owned.schedule_id}: {found}, expected {count}")


async def _listed(temporal: Client, tenant: str, count: int) -> list[str]:
    """The tenant's turn workflows once visibility lists `count` of them (it lags, and the
    dev server deletes a workflow in the background: a minute under a loaded suite)."""
    for _ in range(600):
        found = await _workflows(temporal, tenant)
        if len(found) == count:
            return found
        await asyncio.sleep(0.1)
    raise AssertionError(f"tenant {tenant}: {found}, expected {count}")


async def _schedule_exists(temporal: Client, schedule_id: str) -> bool:
    try:
        await temporal.get_schedule_handle(schedule_id).describe()
        return True
    except RPCError as error:
        assert error.status == RPCStatusCode.NOT_FOUND
        return False


async def test_a_tenant_erases_everything_it_owns_and_nothing_else(
    gateway: str,
    stack: Stack,
    engine: AsyncEngine,
    temporal: Client,
    fake_model: FakeOpenAIServer,
) -> None:
    queue = stack.env["THINK_TASK_QUEUE"]
    async with (
        bearer_client(gateway, "gone-key") as gone,
        bearer_client(gateway, "kept-key") as kept,
    ):
        victim = await _give(gone, engine, temporal, fake_model, GONE, queue)
        survivor = await _give(kept, engine, temporal, fake_model, KEPT, queue)
        before = await _rows(engine, survivor)
        empty = [table for table, rows in before.items() if not rows]
        assert empty == [], f"the survivor has no rows in {empty}"
        assert (await _rows(engine, victim)).keys() == before.keys()
        kept_workflows = await _listed(temporal, KEPT, len(survivor.turn_ids))
        kept_occurrences = await _occurrences(temporal, survivor, 1)
        await _occurrences(temporal, victim, 1)
        await _listed(temporal, GONE, len(victim.turn_ids))

        erased = await gone.delete("/v1/tenant-data")
        assert erased.status_code == 202, erased.text
        body = erased.json()
        assert body["tenant"] == GONE and body["status"] == "accepted"
        erasure = temporal.get_workflow_handle(body["workflow_id"], result_type=EraseResult)
        result = await erasure.result()
        assert result.conversations == 2
        assert result.workflows_deleted >= len(victim.turn_ids)

        # Postgres: nothing of the victim in any table, every row of the survivor as it was.
        assert all(rows == [] for rows in (await _rows(engine, victim)).values())
        assert await _rows(engine, survivor) == before
        assert (await gone.get("/v1/agents/helper/conversations")).json()["conversations"] == []
        # Temporal: the victim's workflows and schedule are gone, the survivor's are all there.
        await _listed(temporal, GONE, 0)
        assert await _listed(temporal, KEPT, len(kept_workflows)) == kept_workflows
        await _occurrences(temporal, victim, 0)
        assert await _occurrences(temporal, survivor, 1) == kept_occurrences
        assert not await _schedule_exists(temporal, victim.schedule_id)
        assert await _schedule_exists(temporal, survivor.schedule_id)
        paused = await kept.get("/v1/agents/gatekeeper/conversations")
        [conversation] = paused.json()["conversations"]
        turns = await kept.get(f"/v1/agents/gatekeeper/conversations/{conversation['id']}/turns")
        assert [t["status"] for t in turns.json()["turns"]] == ["awaiting_approval"]

        # Idempotent: asked again, it runs again and finds nothing.
        again = await gone.delete("/v1/tenant-data")
        assert again.status_code == 202
        rerun = temporal.get_workflow_handle(again.json()["workflow_id"], result_type=EraseResult)
        repeat = await rerun.result()
        assert repeat.conversations == 0
        await replayed(rerun, "erase-tenant")
    await temporal.get_schedule_handle(survivor.schedule_id).delete()
