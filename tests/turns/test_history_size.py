"""A turn's Temporal history does not grow with the conversation: inputs carry ids, not text."""

from __future__ import annotations

import asyncio

import httpx
from temporalio.client import Client

from tests._turn_helpers import helper_path
from think.testing import FakeOpenAIServer, text, tool_call
from think.workflows.names import turn_workflow_id


async def _history(temporal: Client, cid: str, turn_id: str) -> tuple[int, int]:
    handle = temporal.get_workflow_handle(turn_workflow_id("helper", cid, turn_id))
    history = await handle.fetch_history()
    return len(history.events), len(history.to_json())


async def test_turn_50_history_is_the_size_of_turn_1(
    api: httpx.AsyncClient, temporal: Client, cid: str
) -> None:
    url = f"{helper_path(cid)}/turns"
    ids = []
    for i in range(49):
        # Long inputs make a transcript that would dominate the history if it leaked into it.
        response = await api.post(url, json={"input": f"message {i:02d} " + "x" * 2000})
        ids.append(response.json()["turn_id"])
    last = (
        await api.post(
            url, json={"input": "message 49 " + "x" * 2000, "mode": "wait", "wait_timeout": 120}
        )
    ).json()
    assert last["status"] == "completed"
    ids.append(last["turn_id"])
    messages = (await api.get(f"{helper_path(cid)}/messages")).json()["messages"]
    assert len(messages) == 100  # the transcript did grow: 50 user + 50 assistant messages

    first_events, first_bytes = await _history(temporal, cid, ids[0])
    last_events, last_bytes = await _history(temporal, cid, ids[-1])
    assert last_events == first_events
    assert abs(last_bytes - first_bytes) <= first_bytes * 0.02
    assert last_bytes < 32_000  # a 2 KB input times 100 messages would be 200 KB


async def _conversation_events(temporal: Client, cid: str, expect: str) -> dict[str, int]:
    """Every workflow the conversation's turns caused, with its history's length, once the
    (eventually consistent) visibility store lists the workflow `expect`."""
    for _ in range(100):
        ids = [w.id async for w in temporal.list_workflows(f"ThinkConversationId='{cid}'")]
        if expect in ids:
            break
        await asyncio.sleep(0.05)
    found = {}
    for workflow_id in ids:
        handle = temporal.get_workflow_handle(workflow_id)
        await handle.result()
        found[workflow_id] = len((await handle.fetch_history()).events)
    return found


async def test_a_turn_costs_a_handful_of_history_events(
    api: httpx.AsyncClient, temporal: Client, fake_model: FakeOpenAIServer, cid: str
) -> None:
    """Counting every workflow a turn causes: at most 11 events for a plain turn and 18 for a
    tool turn (one workflow, its steps as local activities: 7 and 9 today)."""
    fake_model.script(cid, text("hi"), tool_call("add", {"a": 1, "b": 2}), text("3"))
    url = f"{helper_path(cid)}/turns"
    plain = (await api.post(url, json={"input": "hello", "mode": "wait"})).json()
    assert plain["status"] == "completed", plain
    plain_id = turn_workflow_id("helper", cid, plain["turn_id"])
    plain_events = await _conversation_events(temporal, cid, plain_id)
    assert list(plain_events) == [turn_workflow_id("helper", cid, plain["turn_id"])]
    assert sum(plain_events.values()) <= 11, plain_events
    tool = (await api.post(url, json={"input": "1+2?", "mode": "wait"})).json()
    assert tool["status"] == "completed", tool
    assert [p["type"] for p in tool["message"]["parts"]].count("tool-add") == 1
    both = await _conversation_events(
        temporal, cid, turn_workflow_id("helper", cid, tool["turn_id"])
    )
    tool_events = {w: n for w, n in both.items() if w not in plain_events}
    assert list(tool_events) == [turn_workflow_id("helper", cid, tool["turn_id"])]
    assert sum(tool_events.values()) <= 18, tool_events
