"""Client tools: declared per turn, run by the client; the turn waits for every result."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
from temporalio.client import Client

from tests._turn_helpers import helper_path, tool_part, until_status
from think.testing import FakeOpenAIServer, text, tool_call
from think.workflows.inputs import TurnStatusView
from think.workflows.names import turn_workflow_id

LOCATION = {
    "name": "get_location",
    "description": "The user's location, from the browser.",
    "input_schema": {
        "type": "object",
        "properties": {"precise": {"type": "boolean"}},
        "required": ["precise"],
    },
}
CONFIRM = {"name": "confirm", "description": "Ask the user to confirm.", "input_schema": {}}


async def paused_for_client(
    api: httpx.AsyncClient, cid: str, tools: list[dict[str, Any]]
) -> dict[str, Any]:
    response = await api.post(
        f"{helper_path(cid)}/turns",
        json={"input": "where am I?", "mode": "wait", "client_tools": tools},
    )
    assert response.status_code == 200, response.text
    turn: dict[str, Any] = response.json()
    assert turn["status"] == "awaiting_client_tool", turn
    return turn


async def test_parallel_client_tools_answered_in_reverse_and_at_once(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, temporal: Client, cid: str
) -> None:
    fake_model.script(
        cid,
        tool_call("get_location", {"precise": True}, id="call_loc")
        + tool_call("confirm", {}, id="call_ok"),
        text("You are in Lyon, confirmed."),
    )
    turn = await paused_for_client(api, cid, [LOCATION, CONFIRM])
    pending = [(p["tool_call_id"], p["tool_name"]) for p in turn["pending_client_tools"]]
    assert pending == [("call_loc", "get_location"), ("call_ok", "confirm")]
    # The model was offered the client tools with their schemas.
    offered = {t["function"]["name"]: t for t in fake_model.requests(cid)[0]["body"]["tools"]}
    assert offered["get_location"]["function"]["parameters"] == LOCATION["input_schema"]

    handle = temporal.get_workflow_handle(turn_workflow_id("helper", cid, turn["turn_id"]))
    view = await handle.query("status", result_type=TurnStatusView)
    assert [p.tool_call_id for p in view.pending_client_tools] == ["call_loc", "call_ok"]

    base = f"{turn['status_url']}/tool-results"
    # Reverse order, both at once: neither may clobber the other.
    answers = await asyncio.gather(
        api.post(f"{base}/call_ok", json={"output": {"confirmed": True}}),
        api.post(f"{base}/call_loc", json={"output": {"city": "Lyon"}}),
    )
    assert [a.status_code for a in answers] == [200, 200], [a.text for a in answers]
    final = await until_status(api, turn["status_url"], {"completed", "error"})
    assert final["status"] == "completed", final
    assert tool_part(final, "call_loc")["output"] == {"city": "Lyon"}
    assert tool_part(final, "call_ok")["output"] == {"confirmed": True}
    second = fake_model.requests(cid)[1]["body"]["messages"]
    tool_messages = [m for m in second if m["role"] == "tool"]
    assert tool_messages == [  # in call order, whatever the arrival order
        {"role": "tool", "tool_call_id": "call_loc", "content": '{"city": "Lyon"}'},
        {"role": "tool", "tool_call_id": "call_ok", "content": '{"confirmed": true}'},
    ]

    again = await api.post(f"{base}/call_ok", json={"output": 1})
    assert again.status_code == 409


async def test_the_turn_waits_for_every_result(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    fake_model.script(
        cid,
        tool_call("get_location", {"precise": False}, id="call_loc")
        + tool_call("confirm", {}, id="call_ok"),
        text("Could not locate you."),
    )
    turn = await paused_for_client(api, cid, [LOCATION, CONFIRM])
    base = f"{turn['status_url']}/tool-results"
    first = await api.post(f"{base}/call_loc", json={"error": "permission denied"})
    assert first.status_code == 200
    half = first.json()
    assert half["status"] == "awaiting_client_tool"
    assert [p["tool_call_id"] for p in half["pending_client_tools"]] == ["call_ok"]
    await asyncio.sleep(0.5)
    assert fake_model.calls(cid) == 1  # no model step until every result is in

    await api.post(f"{base}/call_ok", json={"output": None})
    final = await until_status(api, turn["status_url"], {"completed", "error"})
    assert final["status"] == "completed"
    assert tool_part(final, "call_loc")["errorText"] == "permission denied"
    assert tool_part(final, "call_ok")["output"] is None


async def test_bad_tool_results_are_refused(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    fake_model.script(cid, tool_call("get_location", {"precise": True}, id="call_loc"))
    turn = await paused_for_client(api, cid, [LOCATION])
    base = f"{turn['status_url']}/tool-results"
    neither = await api.post(f"{base}/call_loc", json={})
    assert neither.status_code == 422
    assert neither.json()["errors"][0]["field"] == "output"
    both = await api.post(f"{base}/call_loc", json={"output": 1, "error": "x"})
    assert both.status_code == 422
    unknown = await api.post(f"{base}/call_nope", json={"output": 1})
    assert unknown.status_code == 404
    assert unknown.headers["content-type"] == "application/problem+json"
    await api.post(f"{turn['status_url']}/cancel")


async def test_a_client_tool_may_not_shadow_a_server_tool(api: httpx.AsyncClient, cid: str) -> None:
    response = await api.post(
        f"{helper_path(cid)}/turns",
        json={"input": "x", "client_tools": [{"name": "get_weather", "input_schema": {}}]},
    )
    assert response.status_code == 422
    assert response.json()["errors"][0]["field"] == "client_tools.0.name"
