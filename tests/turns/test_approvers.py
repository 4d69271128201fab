"""Who may approve: a decision carries the key that made it, recorded with the answer and in
the turn's Temporal history; an agent with `approvers` takes decisions from those keys only."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest
from sqlalchemy import text as sql
from sqlalchemy.ext.asyncio import AsyncEngine
from temporalio.client import Client

from tests._stack import Stack, bearer_client, extra_gateway
from think.testing import FakeOpenAIServer, text, tool_call
from think.workflows.names import turn_workflow_id

KEYS = "acme-key:acme,ops-key:acme:ops-lead,intern-key:acme:intern"


@pytest.fixture(scope="module")
def approvers_api(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    env = {**stack.env, "THINK_API_KEYS": KEYS}
    with extra_gateway(env, tmp_path_factory.mktemp("approvers")) as url:
        yield url


async def _paused(api: httpx.AsyncClient, agent: str, cid: str) -> dict[str, object]:
    base = f"/v1/agents/{agent}/conversations/{cid}"
    turn: dict[str, object] = (
        await api.post(f"{base}/turns", json={"input": "rm x", "mode": "wait"})
    ).json()
    assert turn["status"] == "awaiting_approval", turn
    return turn


async def _signalled(temporal: Client, workflow_id: str) -> list[dict[str, object]]:
    history = await temporal.get_workflow_handle(workflow_id).fetch_history()
    return [
        json.loads(e.workflow_execution_signaled_event_attributes.input.payloads[0].data)
        for e in history.events
        if e.HasField("workflow_execution_signaled_event_attributes")
    ]


async def test_only_the_agents_approvers_decide(
    approvers_api: str,
    fake_model: FakeOpenAIServer,
    engine: AsyncEngine,
    temporal: Client,
    cid: str,
) -> None:
    fake_model.script(cid, tool_call("delete_file", {"path": "x"}, id="call_del"), text("gone"))
    async with (
        bearer_client(approvers_api, "intern-key") as intern,
        bearer_client(approvers_api, "acme-key") as tenant,
        bearer_client(approvers_api, "ops-key") as ops,
    ):
        turn = await _paused(intern, "guarded", cid)
        [pending] = turn["pending_approvals"]  # type: ignore[misc]
        url = f"{turn['status_url']}/approvals/{pending['approval_id']}"
        for refused in (intern, tenant):  # a named key that is not an approver; the tenant's own
            response = await refused.post(url, json={"approved": True})
            assert response.status_code == 403, response.text
            assert response.headers["content-type"] == "application/problem+json"
        still = (await ops.get(str(turn["status_url"]))).json()
        assert still["status"] == "awaiting_approval"
        decided = await ops.post(url, json={"approved": True, "reason": "checked"})
        assert decided.status_code in (200, 202), decided.text

    async with engine.connect() as conn:
        answers = (
            (
                await conn.execute(
                    sql("SELECT answer FROM turn_answers WHERE turn_id = :t"),
                    {"t": turn["turn_id"]},
                )
            )
            .scalars()
            .all()
        )
    assert [a["principal"] for a in answers] == ["key:ops-lead"]
    workflow_id = turn_workflow_id("guarded", cid, str(turn["turn_id"]), tenant="acme")
    await temporal.get_workflow_handle(workflow_id).result()
    [signal] = await _signalled(temporal, workflow_id)
    assert signal["principal"] == "key:ops-lead"
    assert signal["approved"] is True


async def test_without_approvers_the_tenants_key_decides_and_is_recorded(
    approvers_api: str, fake_model: FakeOpenAIServer, temporal: Client, cid: str
) -> None:
    fake_model.script(cid, tool_call("delete_file", {"path": "x"}, id="call_del"), text("gone"))
    async with bearer_client(approvers_api, "acme-key") as tenant:
        turn = await _paused(tenant, "gatekeeper", cid)
        [pending] = turn["pending_approvals"]  # type: ignore[misc]
        url = f"{turn['status_url']}/approvals/{pending['approval_id']}"
        assert (await tenant.post(url, json={"approved": False})).status_code in (200, 202)
    workflow_id = turn_workflow_id("gatekeeper", cid, str(turn["turn_id"]), tenant="acme")
    await temporal.get_workflow_handle(workflow_id).result()
    [signal] = await _signalled(temporal, workflow_id)
    assert signal["principal"] == "tenant:acme"
