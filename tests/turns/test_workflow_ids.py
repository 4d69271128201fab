"""Temporal ids and search attributes are unambiguous for any tenant, agent and conversation name.

Ids once joined names with `-`: tenants `acme` and `acme-probe` with conversations `probe-z1` and
`z1` mapped to one workflow, and one tenant's turn waited behind the other's paused approval.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st
from temporalio.client import Client, WorkflowHandle

from tests._stack import Stack, extra_gateway
from tests._waits import eventually
from think.testing import FakeOpenAIServer, text, tool_call
from think.workflows.names import parse_turn_workflow_id, turn_workflow_id

COLLIDING = [
    # (tenant, agent, conversation): all the same string once joined with `-` or `:`.
    ("acme", "probe", "probe-z1"),
    ("acme-probe", "probe", "z1"),
    ("acme", "probe-probe", "z1"),
    ("acme:probe", "probe", "z1"),
    ("acme", "probe:probe", "z1"),
    ("acme%3Aprobe", "probe", "z1"),
]


def test_colliding_names_get_distinct_ids() -> None:
    ids = {turn_workflow_id(a, c, "turn_1", tenant=t) for t, a, c in COLLIDING}
    assert len(ids) == len(COLLIDING)
    for tenant, agent, conversation in COLLIDING:
        found = parse_turn_workflow_id(
            turn_workflow_id(agent, conversation, "turn_1", tenant=tenant)
        )
        assert found == (tenant, agent, conversation, "turn_1")


names = st.text(min_size=1, max_size=12)


@given(st.tuples(names, names, names, names), st.tuples(names, names, names, names))
def test_ids_are_injective(one: tuple[str, ...], two: tuple[str, ...]) -> None:
    def make(t: str, a: str, c: str, turn: str) -> str:
        return turn_workflow_id(a, c, turn, tenant=t)

    assert parse_turn_workflow_id(make(*one)) == one
    assert (make(*one) == make(*two)) == (one == two)


def test_foreign_ids_are_not_turns() -> None:
    assert parse_turn_workflow_id("turn-helper-c1-turn_1") is None
    assert parse_turn_workflow_id("think-schedule:q:a:t") is None


@pytest.fixture(scope="module")
def tenants_api(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A gateway whose two tenants' names are a prefix of each other, with a `-` between."""
    env = {**stack.env, "THINK_API_KEYS": "acme-key:acme,probe-key:acme-probe"}
    with extra_gateway(env, tmp_path_factory.mktemp("tenants")) as url:
        yield url


async def test_colliding_tenants_run_apart(
    tenants_api: str, fake_model: FakeOpenAIServer, temporal: Client, cid: str
) -> None:
    """acme's turn paused for an approval does not hold acme-probe's turn, and each tenant's
    workflow and search attributes name that tenant alone."""
    mine, theirs = f"probe-{cid}", cid
    fake_model.script(mine, tool_call("delete_file", {"path": "x"}, id="call_del"), text("gone"))
    fake_model.script(theirs, text("hello probe"))
    auth = {"acme": "acme-key", "acme-probe": "probe-key"}

    def client(tenant: str) -> httpx.AsyncClient:
        headers = {"Authorization": f"Bearer {auth[tenant]}"}
        return httpx.AsyncClient(base_url=tenants_api, headers=headers, timeout=60)

    async with client("acme") as acme, client("acme-probe") as probe:
        paused = (
            await acme.post(
                f"/v1/agents/gatekeeper/conversations/{mine}/turns",
                json={"input": "rm x", "mode": "wait"},
            )
        ).json()
        assert paused["status"] == "awaiting_approval", paused
        done = (
            await probe.post(
                f"/v1/agents/gatekeeper/conversations/{theirs}/turns",
                json={"input": "hi", "mode": "wait"},
            )
        ).json()
        assert done["status"] == "completed", done

    for tenant, conversation, turn, status in (
        ("acme", mine, paused, "awaiting_approval"),
        ("acme-probe", theirs, done, "completed"),
    ):
        workflow_id = turn_workflow_id("gatekeeper", conversation, turn["turn_id"], tenant=tenant)
        handle = temporal.get_workflow_handle(workflow_id)

        async def attributes(
            handle: WorkflowHandle[Any, Any] = handle, status: str = status
        ) -> dict[str, Any] | None:
            described = await handle.describe()
            found = {p.key.name: p.value for p in described.typed_search_attributes}
            # The workflow sets its status after the turn's record does, when it next runs.
            return found if found.get("ThinkTurnStatus") == status else None

        attrs = await eventually(attributes)
        assert attrs["ThinkTenant"] == tenant
        assert attrs["ThinkConversationId"] == conversation
        query = f"ThinkTenant = '{tenant}' AND ThinkConversationId = '{conversation}'"
        assert [w.id async for w in temporal.list_workflows(query)] == [workflow_id]
    # The other tenant's conversation of the same id has no turns of acme-probe's.
    query = f"ThinkTenant = 'acme' AND ThinkConversationId = '{theirs}'"
    assert [w.id async for w in temporal.list_workflows(query)] == []
