"""Actions on the real stack: the ledger runs an effect once whoever asks, refuses a key reused
with other input, authorizes before running and again after approval, survives a worker
SIGKILLed between the effect and its record with one effect, parks an action outside its turn
until one of many concurrent decisions runs it, and answers the inbox and the audit trail."""

from __future__ import annotations

import asyncio
import json
import os
from typing import Any

import httpx
import pytest
from sqlalchemy import text as sql
from sqlalchemy.ext.asyncio import AsyncEngine
from temporalio.client import Client, WorkflowUpdateFailedError
from temporalio.service import RPCError

from tests._replay import HISTORIES, replayer
from tests._stack import Stack, bearer_client
from tests._turn_helpers import tool_part, until_status, wait_turn
from tests._waits import eventually
from tests.action_agents import FollowingUp
from tests.actions._helpers import audit, configure, parked_cancel, paused_wire
from tests.actions._payments import FakePayments
from think import ThinkService
from think.testing import FakeOpenAIServer, text, tool_call
from think.workflows.inputs import ParkedActionOutcome, ToolDecision
from think.workflows.names import APPROVE, parked_action_workflow_id


def _error(part: dict[str, Any]) -> dict[str, Any]:
    assert part["state"] == "output-error", part
    found: dict[str, Any] = json.loads(part["errorText"])
    return found


def _cid(base: str, n: int) -> str:
    return f"{base}-{n}"


async def test_the_same_refund_asked_in_two_conversations_runs_once(
    api: httpx.AsyncClient,
    service: ThinkService,
    fake_model: FakeOpenAIServer,
    payments: FakePayments,
    cid: str,
) -> None:
    order = f"o-{cid}"
    first, second = _cid(cid, 1), _cid(cid, 2)
    for conversation in (first, second):
        await configure(service, payments, conversation, grants=["refunds"])
        call = tool_call("refund", {"order_id": order, "amount": 12.5}, id="call_r")
        fake_model.script(conversation, call, text("refunded"))
    before = payments.effects["/refunds"]

    one = await wait_turn(api, "refunder", first, "refund it", status="completed")
    two = await wait_turn(api, "refunder", second, "refund it too", status="completed")

    ran, replayed = tool_part(one, "call_r"), tool_part(two, "call_r")
    assert ran["state"] == "output-available", ran
    assert ran["state"] == replayed["state"] == "output-available"
    assert ran["output"] == replayed["output"]
    assert ran["output"]["order_id"] == order
    assert payments.effects["/refunds"] == before + 1
    # The receipt reaches the reply of the call that made it, and is not sent again on replay.
    files = [p for p in one["message"]["parts"] if p["type"] == "file"]
    assert [f["mediaType"] for f in files] == ["text/plain"]
    assert not [p for p in two["message"]["parts"] if p["type"] == "file"]

    [row] = await audit(api, key=f"refund:{order}")
    assert row["status"] == "settled"
    assert row["replays"] == 1
    assert row["conversation_id"] == first
    assert row["result"] == ran["output"]
    assert row["reclaimed"] is False
    assert row["input"] == {"order_id": order, "amount": 12.5}


async def test_a_key_reused_with_other_input_is_a_conflict_the_model_reads(
    api: httpx.AsyncClient,
    service: ThinkService,
    fake_model: FakeOpenAIServer,
    payments: FakePayments,
    cid: str,
) -> None:
    order = f"o-{cid}"
    await configure(service, payments, cid, grants=["refunds"])
    fake_model.script(
        cid,
        tool_call("refund", {"order_id": order, "amount": 5}, id="call_a"),
        tool_call("refund", {"order_id": order, "amount": 500}, id="call_b"),
        text("done"),
    )
    turn = await wait_turn(api, "refunder", cid, "refund twice", status="completed")
    assert tool_part(turn, "call_a")["state"] == "output-available"
    conflict = _error(tool_part(turn, "call_b"))
    assert conflict["error"] == "conflict"
    assert conflict["key"] == f"refund:{order}"
    [row] = await audit(api, key=f"refund:{order}")
    assert row["input"]["amount"] == 5  # the first input stands


async def test_an_action_needing_a_permission_not_granted_never_runs(
    api: httpx.AsyncClient,
    service: ThinkService,
    fake_model: FakeOpenAIServer,
    payments: FakePayments,
    cid: str,
) -> None:
    order = f"o-{cid}"
    await configure(service, payments, cid)  # no grants
    fake_model.script(
        cid, tool_call("refund", {"order_id": order, "amount": 1}, id="call_r"), text("no")
    )
    before = payments.requests["/refunds"]
    turn = await wait_turn(api, "refunder", cid, "refund", status="completed")
    refused = _error(tool_part(turn, "call_r"))
    assert refused["error"] == "unauthorized"
    assert "'refunds' is not granted" in refused["message"]
    assert payments.requests["/refunds"] == before
    assert await audit(api, key=f"refund:{order}") == []


async def test_a_failed_run_releases_its_key_and_the_next_call_runs_again(
    api: httpx.AsyncClient,
    service: ThinkService,
    fake_model: FakeOpenAIServer,
    payments: FakePayments,
    cid: str,
) -> None:
    await configure(service, payments, cid, grants=["refunds"])
    fake_model.script(
        cid,
        tool_call("refund", {"order_id": "bad", "amount": 1}, id="call_1"),
        tool_call("refund", {"order_id": "bad", "amount": 1}, id="call_2"),
        text("gave up"),
    )
    turn = await wait_turn(api, "refunder", cid, "refund bad", status="completed")
    for call in ("call_1", "call_2"):
        failed = _error(tool_part(turn, call))
        assert failed["error"] == "failed"
        assert "refused order 'bad'" in failed["message"]
    rows = await audit(api, key="refund:bad", conversation_id=cid)
    assert [r["status"] for r in rows] == ["failed", "failed"]  # two runs, both recorded
    assert not [p for p in turn["message"]["parts"] if p["type"] == "file"]  # none on failure


async def test_results_are_cut_for_the_model_and_kept_whole_in_the_ledger(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    fake_model.script(cid, tool_call("big_report", {"n": 400}, id="call_big"), text("ok"))
    turn = await wait_turn(api, "refunder", cid, "report", status="completed")
    output = tool_part(turn, "call_big")["output"]
    assert isinstance(output, str)
    assert "[truncated:" in output
    assert len(output) < 400
    [row] = await audit(api, key="big:400", conversation_id=cid)
    assert len(row["result"]["rows"]) == 400


async def test_a_worker_killed_between_the_effect_and_its_record_leaves_one_effect(
    api: httpx.AsyncClient,
    stack: Stack,
    service: ThinkService,
    fake_model: FakeOpenAIServer,
    payments: FakePayments,
    cid: str,
) -> None:
    order = f"o-{cid}"
    await configure(service, payments, cid, grants=["refunds"], hang_after_effect=True)
    fake_model.script(
        cid, tool_call("refund", {"order_id": order, "amount": 9}, id="call_r"), text("done")
    )
    effects, requests = payments.effects["/refunds"], payments.requests["/refunds"]
    submitted = await api.post(
        f"/v1/agents/refunder/conversations/{cid}/turns", json={"input": "refund", "mode": "submit"}
    )
    assert submitted.status_code == 202, submitted.text
    # The refund is made; the action then hangs before its result is recorded.
    await eventually(lambda: _now(payments.effects["/refunds"] > effects))
    stack.replace_worker()
    turn = await until_status(api, submitted.json()["status_url"], {"completed", "error"}, 90)
    assert turn["status"] == "completed", turn
    assert tool_part(turn, "call_r")["state"] == "output-available"
    assert payments.effects["/refunds"] == effects + 1  # one refund
    assert payments.requests["/refunds"] == requests + 2  # asked twice, with one key
    [row] = await audit(api, key=f"refund:{order}")
    assert row["status"] == "settled"
    assert row["reclaimed"] is True


async def _now(value: bool) -> bool:
    return value


async def test_a_parked_action_lets_the_conversation_go_on_and_one_of_many_decisions_runs_it(
    api: httpx.AsyncClient,
    service: ThinkService,
    fake_model: FakeOpenAIServer,
    payments: FakePayments,
    engine: AsyncEngine,
    cid: str,
) -> None:
    order = f"o-{cid}"
    await configure(service, payments, cid)
    fake_model.script(
        cid,
        tool_call("cancel_order", {"order_id": order}, id="call_c"),
        text("asked for approval"),
        text("meanwhile, hello"),
        text("noted"),
    )
    before = payments.effects["/cancellations"]
    asked = await wait_turn(api, "refunder", cid, "cancel my order", status="completed")
    parked = tool_part(asked, "call_c")["output"]
    assert parked["status"] == "awaiting_approval"
    approval_id = parked["approval_id"]

    inbox = (await api.get("/v1/approvals", params={"agent": "refunder"})).json()["approvals"]
    [waiting] = [a for a in inbox if a["approval_id"] == approval_id]
    assert waiting["kind"] == "durable_pause"
    assert waiting["key"] == f"cancel:{order}"
    assert waiting["turn_id"] == asked["turn_id"]

    # The conversation goes on while the action waits.
    await wait_turn(api, "refunder", cid, "hello?", status="completed")

    url = f"{asked['status_url']}/approvals/{approval_id}"
    decisions = await asyncio.gather(
        *(api.post(url, json={"approved": True, "reason": f"n{i}"}) for i in range(20))
    )
    codes = sorted(d.status_code for d in decisions)
    assert codes.count(409) == 19, [d.text for d in decisions]
    assert codes[0] in (200, 202)

    async def settled() -> Any:
        rows = await audit(api, key=f"cancel:{order}")
        return rows if rows and rows[0]["status"] == "settled" else None

    [row] = await eventually(settled, within=30)
    assert payments.effects["/cancellations"] == before + 1
    assert row["approved_by"] == "tenant:default"
    assert row["approved_at"] is not None
    inbox = (await api.get("/v1/approvals")).json()["approvals"]
    assert approval_id not in [a["approval_id"] for a in inbox]
    # The conversation learns the outcome as a notice its next turn reads.
    async with engine.connect() as conn:
        notice = (
            await conn.execute(
                sql("SELECT parts FROM messages WHERE id = :id"), {"id": f"notice_{row['id']}"}
            )
        ).scalar_one()
    assert "was approved by tenant:default and ran" in notice[0]["text"]
    # Deciding again is refused: the first decision stood.
    again = await api.post(url, json={"approved": False})
    assert again.status_code == 409


async def test_an_undecided_parked_action_expires_and_a_follow_up_turn_reports_it(
    api: httpx.AsyncClient,
    service: ThinkService,
    fake_model: FakeOpenAIServer,
    payments: FakePayments,
    cid: str,
) -> None:
    await configure(service, payments, cid, agent=FollowingUp)
    fake_model.script(
        cid,
        tool_call("cancel_order", {"order_id": f"o-{cid}"}, id="call_c"),
        text("asked"),
        text("it expired, sorry"),
    )
    asked = await wait_turn(api, "following-up", cid, "cancel", status="completed")
    approval_id = tool_part(asked, "call_c")["output"]["approval_id"]
    assert approval_id

    async def follow_up() -> Any:
        turns = (await api.get(f"/v1/agents/following-up/conversations/{cid}/turns")).json()[
            "turns"
        ]
        done = [t for t in turns if t["turn_id"] != asked["turn_id"] and t["status"] == "completed"]
        return done or None

    [reported] = await eventually(follow_up, within=60)
    assert reported["message"]["parts"][-1]["text"] == "it expired, sorry"
    [row] = await audit(api, agent="following-up", conversation_id=cid)
    assert row["status"] == "expired"


async def test_a_permission_revoked_after_approval_refuses_the_approved_action(
    api: httpx.AsyncClient,
    service: ThinkService,
    fake_model: FakeOpenAIServer,
    payments: FakePayments,
    cid: str,
) -> None:
    await configure(service, payments, cid, grants=["wires"])
    before = payments.requests["/wires"]
    paused, pending, order = await paused_wire(api, fake_model, cid)
    inbox = (await api.get("/v1/approvals", params={"agent": "refunder"})).json()["approvals"]
    [listed] = [a for a in inbox if a["approval_id"] == pending["approval_id"]]
    assert (listed["kind"], listed["action"], listed["key"]) == ("inline", "wire", f"wire:{order}")

    await configure(service, payments, cid, grants=[])  # revoked while it waits
    url = f"{paused['status_url']}/approvals/{pending['approval_id']}"
    assert (await api.post(url, json={"approved": True})).status_code in (200, 202)
    turn = await until_status(api, paused["status_url"], {"completed", "error"})
    assert turn["status"] == "completed", turn
    refused = _error(tool_part(turn, "call_w"))
    assert refused["error"] == "unauthorized"
    assert payments.requests["/wires"] == before


async def test_the_inbox_is_the_tenants_own(
    tenants: str,
    service: ThinkService,
    fake_model: FakeOpenAIServer,
    payments: FakePayments,
    cid: str,
) -> None:
    await configure(service, payments, cid, tenant="alice")
    async with (
        bearer_client(tenants, "alice-key") as alice,
        bearer_client(tenants, "bob-key") as bob,
    ):
        _, approval_id = await parked_cancel(alice, fake_model, cid)
        mine = (await alice.get("/v1/approvals")).json()["approvals"]
        theirs = (await bob.get("/v1/approvals")).json()["approvals"]
        assert approval_id in [a["approval_id"] for a in mine]
        assert approval_id not in [a["approval_id"] for a in theirs]
        assert await audit(bob, conversation_id=cid) == []
        assert len(await audit(alice, conversation_id=cid)) == 1


async def test_an_operator_decides_a_parked_action_with_the_update_and_its_history_replays(
    api: httpx.AsyncClient,
    service: ThinkService,
    fake_model: FakeOpenAIServer,
    payments: FakePayments,
    temporal: Client,
    cid: str,
) -> None:
    await configure(service, payments, cid)
    _, approval_id = await parked_cancel(api, fake_model, cid)
    order = f"o-{cid}"
    handle = temporal.get_workflow_handle(parked_action_workflow_id("default", approval_id))
    outcome = await handle.execute_update(
        APPROVE,
        ToolDecision(approval_id=approval_id, approved=True),
        result_type=ParkedActionOutcome,
    )
    assert outcome.status == "settled"
    # Decided: a second one is refused (by the validator, or the workflow has closed).
    with pytest.raises((WorkflowUpdateFailedError, RPCError)):
        await handle.execute_update(APPROVE, ToolDecision(approval_id=approval_id, approved=False))
    [row] = await audit(api, key=f"cancel:{order}")
    assert (row["status"], row["approved_by"]) == ("settled", "update")
    await handle.result()
    history = await handle.fetch_history()
    result = await replayer().replay_workflow(history, raise_on_replay_failure=True)
    assert result.replay_failure is None
    path = HISTORIES / "parked-action.json"
    if os.environ.get("THINK_RECORD_HISTORIES") and not path.exists():
        path.write_text(history.to_json())


async def test_an_inline_approved_action_records_who_approved_it(
    api: httpx.AsyncClient,
    service: ThinkService,
    fake_model: FakeOpenAIServer,
    payments: FakePayments,
    cid: str,
) -> None:
    await configure(service, payments, cid, grants=["wires"])
    before = payments.effects["/wires"]
    paused, pending, order = await paused_wire(api, fake_model, cid)
    url = f"{paused['status_url']}/approvals/{pending['approval_id']}"
    assert (await api.post(url, json={"approved": True})).status_code in (200, 202)
    turn = await until_status(api, paused["status_url"], {"completed", "error"})
    assert tool_part(turn, "call_w")["state"] == "output-available"
    assert payments.effects["/wires"] == before + 1
    [row] = await audit(api, key=f"wire:{order}")
    assert row["status"] == "settled"
    assert row["approval_id"] == pending["approval_id"]
    assert row["approved_by"] == "tenant:default"
    assert row["approved_at"] is not None
