"""A turn's Temporal history does not grow with the conversation: inputs carry ids, not text."""

from __future__ import annotations

import httpx
from temporalio.client import Client

from tests.conftest import helper_path
from think.workflows._names import turn_workflow_id


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
