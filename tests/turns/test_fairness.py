"""Tenant fairness on the task queue: every turn's workflow carries its tenant as Temporal's
fairness key and its agent's `Think.priority` as the priority key, and the dev server honours
them (`matching.enableFairness`), so a tenant's backlog does not hold another tenant's turn
behind it.

The stack here is a worker and a gateway of their own, on a task queue of their own, with
two workflow-task slots (`THINK_WORKER_WORKFLOW_TASK_SLOTS=2`): a few dozen slow turns are then
enough to make a backlog, and what is asserted is an order (which turn started before which),
never a duration."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client

from tests._stack import Stack, bearer_client, own_stack
from tests._waits import eventually
from think import Think
from think.exceptions import UserError
from think.testing import FakeOpenAIServer, reply, stall, text
from think.turns import fairness_key
from think.workflows.names import turn_workflow_id

KEYS = "heavy-key:heavy,light-key:light"
HEAVY_TURNS = 40
SLOTS = 2


@pytest.fixture(scope="module")
def fair(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    env = {
        **stack.env,
        "THINK_AGENTS": "tests.agents:Helper,tests.fairness_agents:Urgent",
        "THINK_TASK_QUEUE": f"fairness-{secrets.token_hex(4)}",
        "THINK_API_KEYS": KEYS,
        "THINK_WORKER_WORKFLOW_TASK_SLOTS": str(SLOTS),
    }
    with own_stack(env, tmp_path_factory.mktemp("fairness")) as own:
        yield own


async def submit(api: httpx.AsyncClient, agent: str, cid: str) -> str:
    answer = await api.post(
        f"/v1/agents/{agent}/conversations/{cid}/turns", json={"input": "q", "mode": "submit"}
    )
    assert answer.status_code in (200, 202), answer.text
    turn_id: str = answer.json()["turn_id"]
    return turn_id


async def turn_view(api: httpx.AsyncClient, agent: str, cid: str, turn_id: str) -> dict[str, Any]:
    answer = await api.get(f"/v1/agents/{agent}/conversations/{cid}/turns/{turn_id}")
    assert answer.status_code == 200, answer.text
    view: dict[str, Any] = answer.json()
    return view


async def started_event(temporal: Client, workflow_id: str) -> HistoryEvent:
    history = await temporal.get_workflow_handle(workflow_id).fetch_history()
    return history.events[0]


async def test_a_turn_carries_its_tenant_and_its_agents_priority(
    fair: Stack, fake_model: FakeOpenAIServer, temporal: Client
) -> None:
    plain, urgent = f"c-{secrets.token_hex(6)}", f"c-{secrets.token_hex(6)}"
    for cid in (plain, urgent):
        fake_model.script(cid, text("done"))
    async with bearer_client(fair.api_url, "light-key") as light:
        plain_turn = await submit(light, "helper", plain)
        urgent_turn = await submit(light, "urgent", urgent)
        for agent, cid, turn_id in (("helper", plain, plain_turn), ("urgent", urgent, urgent_turn)):
            await eventually(lambda a=agent, c=cid, t=turn_id: _ended(light, a, c, t), within=60)
        # A regenerate of the urgent agent's answer is one of its turns too.
        answered = await turn_view(light, "urgent", urgent, urgent_turn)
        fake_model.script(urgent, text("again"))
        again = await light.post(
            f"/v1/agents/urgent/conversations/{urgent}/regenerate",
            json={"message_id": answered["message_id"], "mode": "wait"},
        )
        assert again.status_code == 200 and again.json()["status"] == "completed", again.text
        regenerated = again.json()["turn_id"]
    for agent, cid, turn_id, key in (
        ("helper", plain, plain_turn, 0),  # unset: Temporal's default, 3
        ("urgent", urgent, urgent_turn, 1),
        ("urgent", urgent, regenerated, 1),
    ):
        workflow_id = turn_workflow_id(agent, cid, turn_id, tenant="light")
        described = await temporal.get_workflow_handle(workflow_id).describe()
        priority = described.raw_description.workflow_execution_info.priority
        assert (priority.priority_key, priority.fairness_key) == (key, "light")
        started = (
            await started_event(temporal, workflow_id)
        ).workflow_execution_started_event_attributes
        assert (started.priority.priority_key, started.priority.fairness_key) == (key, "light")


async def _ended(api: httpx.AsyncClient, agent: str, cid: str, turn_id: str) -> bool:
    return (await turn_view(api, agent, cid, turn_id))["status"] == "completed"


async def test_a_light_tenants_turn_is_not_queued_behind_a_heavy_tenants_backlog(
    fair: Stack, fake_model: FakeOpenAIServer, temporal: Client
) -> None:
    """The heavy tenant submits 40 slow turns (one per conversation, so each is a workflow
    of its own on the task queue) to a worker that runs two at a time; once all 40 are on
    Temporal, the light tenant submits one. Served first come, first served it would start
    after all 40; with the tenants as fairness keys it starts at the next free slot, while
    most of the heavy backlog still waits. Compared: when each turn ended (a turn's
    `started_at` is written by the first step the worker begins beside the start, before
    Temporal dispatches anything, so it says nothing of the queue)."""
    run = secrets.token_hex(4)
    heavy_cids = [f"heavy-{run}-{i}" for i in range(HEAVY_TURNS)]
    light_cid = f"light-{run}"
    for cid in heavy_cids:
        fake_model.script(cid, reply(stall(0.3), text("heavy")))
    fake_model.script(light_cid, text("light"))
    queue = fair.env["THINK_TASK_QUEUE"]
    async with (
        bearer_client(fair.api_url, "heavy-key") as heavy,
        bearer_client(fair.api_url, "light-key") as light,
    ):
        heavy_turns = await asyncio.gather(*(submit(heavy, "helper", cid) for cid in heavy_cids))

        async def all_on_temporal() -> bool:
            count = await temporal.count_workflows(
                f"TaskQueue = '{queue}' AND ThinkTenant = 'heavy'"
            )
            return count.count == HEAVY_TURNS

        await eventually(all_on_temporal, within=60)
        light_turn = await submit(light, "helper", light_cid)

        async def all_ended() -> bool:
            views = [
                await turn_view(heavy, "helper", cid, turn_id)
                for cid, turn_id in zip(heavy_cids, heavy_turns, strict=True)
            ]
            return all(view["status"] == "completed" for view in views)

        await eventually(lambda: _ended(light, "helper", light_cid, light_turn), within=120)
        await eventually(all_ended, within=120, every=0.5)
        light_done = (await turn_view(light, "helper", light_cid, light_turn))["completed_at"]
        heavy_done = [
            (await turn_view(heavy, "helper", cid, turn_id))["completed_at"]
            for cid, turn_id in zip(heavy_cids, heavy_turns, strict=True)
        ]
    behind = sum(1 for done in heavy_done if done > light_done)
    # Fair: the light turn takes the next free slot, ahead of most of the backlog (measured:
    # 36 of the 40 ended after it). First come, first served (the same test on a dev server
    # without `matching.enableFairness`): none.
    assert behind >= HEAVY_TURNS // 2, (behind, light_done, sorted(heavy_done))


def test_a_priority_is_one_to_five() -> None:
    for wrong in (0, 6, True, 2.5, "1"):
        with pytest.raises(UserError, match="priority"):
            type("Wrong", (Think,), {"priority": wrong})
    assert type("Fine", (Think,), {"priority": 5}).priority == 5


def test_a_tenant_too_long_for_a_fairness_key_is_hashed() -> None:
    assert fairness_key("acme") == "acme"
    long = "t" * 65
    assert len(fairness_key(long).encode()) <= 64
    assert fairness_key(long) == fairness_key(long) != fairness_key(long + "x")
