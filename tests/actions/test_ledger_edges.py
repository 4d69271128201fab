"""The ledger's edges on the real stack: a run left `pending` by a worker that died is
reclaimed by the next call of its key once its lease has run out (from any conversation); the
sweeper expires parked actions past their wait and forgets settled keys past `remember`; a
timeout is an error the model reads and releases the key; the inbox shows an approver only
what it may decide."""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from sqlalchemy import text as sql
from sqlalchemy.ext.asyncio import AsyncEngine

from tests._stack import Stack, bearer_client, extra_gateway
from tests._turn_helpers import tool_part, wait_turn
from tests.action_agents import GuardedRefunder
from tests.actions._helpers import audit, configure, parked_cancel
from tests.actions._payments import FakePayments
from think import Settings, ThinkService
from think.storage import Database, action_ledger
from think.testing import FakeOpenAIServer, text, tool_call
from think.tools import input_hash


async def _row(engine: AsyncEngine, **values: Any) -> str:
    """A ledger row written as a dead worker (or an old run) left it."""
    row = {
        "id": f"act_{secrets.token_hex(6)}",
        "tenant": "default",
        "agent": "refunder",
        "action": "refund",
        "input_hash": "",
        "conversation_id": "elsewhere",
        "claims": 1,
        "attempt": 1,
        **values,
    }
    row["input"] = json.dumps(row["input"])
    columns = ", ".join(row)
    params = ", ".join(f"CAST(:{c} AS jsonb)" if c == "input" else f":{c}" for c in row)
    async with engine.begin() as conn:
        await conn.execute(sql(f"INSERT INTO action_ledger ({columns}) VALUES ({params})"), row)
    return str(row["id"])


async def test_a_run_whose_worker_died_is_reclaimed_by_the_next_call_once_its_lease_is_over(
    api: httpx.AsyncClient,
    service: ThinkService,
    fake_model: FakeOpenAIServer,
    payments: FakePayments,
    engine: AsyncEngine,
    cid: str,
) -> None:
    order = f"o-{cid}"
    arguments = {"order_id": order, "amount": 3.0}
    dead = await _row(
        engine,
        key=f"refund:{order}",
        status="pending",
        input=arguments,
        input_hash=input_hash(arguments),
        turn_id="turn_gone",
        tool_call_id="call_gone",
    )
    async with engine.begin() as conn:
        await conn.execute(
            sql("UPDATE action_ledger SET lease_until = now() - interval '1 second' WHERE id = :i"),
            {"i": dead},
        )
    await configure(service, payments, cid, grants=["refunds"])
    fake_model.script(cid, tool_call("refund", arguments, id="call_r"), text("done"))
    turn = await wait_turn(api, "refunder", cid, "refund", status="completed")
    assert tool_part(turn, "call_r")["state"] == "output-available"
    [row] = await audit(api, key=f"refund:{order}")
    assert (row["id"], row["status"], row["reclaimed"]) == (dead, "settled", True)


async def test_the_sweeper_expires_overdue_parked_actions_and_forgets_old_keys(
    settings: Settings, engine: AsyncEngine
) -> None:
    parked = await _row(
        engine,
        key=f"cancel:{secrets.token_hex(4)}",
        status="parked",
        input={},
        approval_id=f"approval_{secrets.token_hex(6)}",
        approval_kind="durable_pause",
        expires_at="2000-01-01T00:00:00Z",
    )
    forgotten = await _row(
        engine,
        key=f"refund:{secrets.token_hex(4)}",
        status="settled",
        input={},
        expires_at="2000-01-01T00:00:00Z",
    )
    remembered = await _row(
        engine, key=f"refund:{secrets.token_hex(4)}", status="settled", input={}
    )
    db = await Database(settings.libpq_url, max_size=2).open()
    try:
        # The stack's workers sweep too, and may have come first: the rows say what happened.
        await action_ledger.sweep_ledger(db)
        row = await action_ledger.get_action(db, parked)
        assert row is not None and row.status == "expired"
        assert await action_ledger.get_action(db, forgotten) is None
        assert await action_ledger.get_action(db, remembered) is not None
    finally:
        await db.close()


async def test_a_timeout_is_an_error_the_model_reads_and_releases_the_key(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    fake_model.script(cid, tool_call("slow_charge", {"n": 1}, id="call_s"), text("it timed out"))
    turn = await wait_turn(api, "refunder", cid, "charge", status="completed")
    part = tool_part(turn, "call_s")
    assert part["state"] == "output-error"
    error = json.loads(part["errorText"])
    assert error["error"] == "timeout"
    assert "did not finish within 1 s" in error["message"]
    rows = await audit(api, key="slow:1", conversation_id=cid)
    assert [r["status"] for r in rows] == ["failed"]


KEYS = "acme-key:acme,ops-key:acme:ops-lead,intern-key:acme:intern"


@pytest.fixture(scope="module")
def approvers_api(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    env = {**stack.env, "THINK_API_KEYS": KEYS}
    with extra_gateway(env, tmp_path_factory.mktemp("action-approvers")) as url:
        yield url


async def test_the_inbox_shows_an_approver_what_it_may_decide_and_no_one_else(
    approvers_api: str,
    service: ThinkService,
    fake_model: FakeOpenAIServer,
    payments: FakePayments,
    cid: str,
) -> None:
    await configure(service, payments, cid, agent=GuardedRefunder, tenant="acme")
    async with (
        bearer_client(approvers_api, "intern-key") as intern,
        bearer_client(approvers_api, "ops-key") as ops,
    ):
        asked, approval_id = await parked_cancel(intern, fake_model, cid, "guarded-refunder")

        async def listed(client: httpx.AsyncClient) -> list[str]:
            found = await client.get("/v1/approvals", params={"agent": "guarded-refunder"})
            assert found.status_code == 200, found.text
            return [a["approval_id"] for a in found.json()["approvals"]]

        assert approval_id in await listed(ops)
        assert approval_id not in await listed(intern)
        [waiting] = [
            a
            for a in (await ops.get("/v1/approvals")).json()["approvals"]
            if a["approval_id"] == approval_id
        ]
        assert waiting["requested_by"] == "intern"
        url = f"{asked['status_url']}/approvals/{approval_id}"
        refused = await intern.post(url, json={"approved": True})
        assert refused.status_code == 403, refused.text
        decided = await ops.post(url, json={"approved": False, "reason": "not today"})
        assert decided.status_code in (200, 202), decided.text
        assert approval_id not in await listed(ops)
        unknown = await ops.get("/v1/approvals", params={"agent": "nobody"})
        assert unknown.status_code == 404
        assert unknown.headers["content-type"] == "application/problem+json"
