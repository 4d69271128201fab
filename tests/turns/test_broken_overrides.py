"""An agent override that raises never wedges its conversation: the turn ends `error` at its
first attempt with the safe message (the exception's text in the worker's log only), the turns
after it run, and the gateway still admits turns (`Fragile` and `Wrecked` in tests/agents.py).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest
from temporalio.client import Client

from tests._sse import chunks, read_stream
from tests._stack import Stack
from tests._turn_helpers import activity_attempts
from tests.agents import OVERRIDE_SECRET, Fragile
from think import ThinkService, UIMessage
from think.testing import FakeOpenAIServer, tool_call
from think.workflows.names import MODEL_STEP_ACTIVITY, turn_workflow_id

SAFE = "because of an internal error"


def turns_url(agent: str, cid: str) -> str:
    return f"/v1/agents/{agent}/conversations/{cid}/turns"


async def failed_turn(
    api: httpx.AsyncClient, agent: str, cid: str, submission: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Submit a turn that must end `error`; check its stream, its record and its messages say
    so without the exception's text, and return its record."""
    response = await api.post(turns_url(agent, cid), json={"input": "hello", **(submission or {})})
    assert response.status_code == 202, response.text
    submitted = response.json()
    # Bounded: the stream ends (today's bug retried the step forever, so it never did).
    body, events = await asyncio.wait_for(read_stream(api, submitted["stream_url"]), timeout=30)
    assert events[-1].data == "[DONE]"
    streamed = chunks(events)
    assert streamed[-1]["type"] == "error", streamed
    assert SAFE in streamed[-1]["errorText"]
    turn: dict[str, Any] = (await api.get(submitted["status_url"])).json()
    assert turn["status"] == "error", turn
    assert SAFE in turn["error"] and turn["turn_id"] in turn["error"]
    assert turn["error"] == streamed[-1]["errorText"]
    messages = (await api.get(f"/v1/agents/{agent}/conversations/{cid}/messages")).text
    for shown in (body, json.dumps(turn), messages):
        assert OVERRIDE_SECRET not in shown
        assert "broke" not in shown and "RuntimeError" not in shown
    return turn


async def model_step_attempts(temporal: Client, agent: str, cid: str, turn_id: str) -> list[int]:
    handle = temporal.get_workflow_handle(turn_workflow_id(agent, cid, turn_id))
    # The turn ends in Postgres inside its model step, before the workflow task that records
    # the step's marker completes: wait for the workflow, or the history may not have it yet.
    await asyncio.wait_for(handle.result(), timeout=30)
    history = await handle.fetch_history()
    return activity_attempts(history.events, MODEL_STEP_ACTIVITY)


def worker_log(stack: Stack) -> str:
    return "\n".join(p.read_text(errors="replace") for p in stack.logs.glob("worker-*.log"))


async def completes(api: httpx.AsyncClient, agent: str, cid: str, words: str) -> dict[str, Any]:
    response = await api.post(
        turns_url(agent, cid), json={"input": words, "mode": "wait", "wait_timeout": 30}
    )
    assert response.status_code == 200, response.text
    turn: dict[str, Any] = response.json()
    assert turn["status"] == "completed", turn
    return turn


@pytest.mark.parametrize(
    "config",
    [
        pytest.param({"break": "get_tools"}, id="get_tools"),
        pytest.param({"break": "get_model"}, id="get_model"),
        pytest.param({"break": "get_system_prompt"}, id="get_system_prompt"),
        pytest.param({"break": "get_mcp_servers"}, id="get_mcp_servers"),
        pytest.param({"break": "get_skills"}, id="get_skills"),
        # A UserError's text is shown to clients when the framework raises one; from an
        # override it is as internal as any other exception.
        pytest.param({"break": "get_tools", "as": "UserError"}, id="get_tools-UserError"),
        # Model resolution: a named endpoint whose key variable is not set, and a get_model
        # that returns neither a model id nor a client.
        pytest.param({"model": "keyless/scripted-model"}, id="endpoint-without-key"),
        pytest.param({"model": 42}, id="not-a-model"),
    ],
)
async def test_a_raising_override_ends_the_turn_and_the_next_one_runs(
    api: httpx.AsyncClient,
    service: ThinkService,
    fake_model: FakeOpenAIServer,
    temporal: Client,
    stack: Stack,
    cid: str,
    config: dict[str, Any],
) -> None:
    conv = service.conversation(Fragile, cid)
    await conv.configure(config)
    turn = await failed_turn(api, "fragile", cid)
    assert fake_model.calls(cid) == 0
    assert "THINK_TEST_UNSET_KEY" not in turn["error"]
    # At the first attempt, not after retries.
    assert await model_step_attempts(temporal, "fragile", cid, turn["turn_id"]) == [1]
    if "break" in config:
        assert f"{config['break']} broke: {OVERRIDE_SECRET}" in worker_log(stack)

    await conv.configure({})
    answer = await completes(api, "fragile", cid, "are you there?")
    assert answer["message"]["parts"][-1]["text"] == "echo: are you there?"
    assert fake_model.calls(cid) == 1


async def test_turns_queued_behind_a_broken_one_are_not_blocked(
    api: httpx.AsyncClient, service: ThinkService, fake_model: FakeOpenAIServer, cid: str
) -> None:
    conv = service.conversation(Fragile, cid)
    await conv.configure({"break": "get_tools"})
    submitted = [
        (await api.post(turns_url("fragile", cid), json={"input": f"q{i}"})).json()
        for i in range(3)
    ]
    for turn in submitted:
        result = await asyncio.wait_for(conv.result(turn["turn_id"]), timeout=30)
        assert result.status == "error"
        assert result.error is not None and OVERRIDE_SECRET not in result.error
    await conv.configure({})
    await completes(api, "fragile", cid, "and now?")
    assert fake_model.calls(cid) == 1


async def test_a_raising_repair_of_an_interrupted_tool_call(
    api: httpx.AsyncClient,
    service: ThinkService,
    fake_model: FakeOpenAIServer,
    stack: Stack,
    cid: str,
) -> None:
    """`repair_interrupted_tool_part` runs when the history holds a call without a result."""
    conv = service.conversation(Fragile, cid)
    interrupted = {
        "type": "tool-get_weather",
        "toolCallId": "call_interrupted",
        "state": "input-available",
        "input": {"city": "Oslo"},
    }
    await conv.add_messages(
        [
            UIMessage.user_text("weather?"),
            UIMessage(role="assistant", parts=[{"type": "step-start"}, interrupted]),
        ]
    )
    await conv.configure({"break": "repair_interrupted_tool_part"})
    await failed_turn(api, "fragile", cid)
    assert fake_model.calls(cid) == 0
    assert f"repair_interrupted_tool_part broke: {OVERRIDE_SECRET}" in worker_log(stack)

    await conv.configure({})
    await completes(api, "fragile", cid, "try again")
    [request] = fake_model.requests(cid)
    [settled] = [m for m in request["body"]["messages"] if m["role"] == "tool"]
    assert settled["tool_call_id"] == "call_interrupted"  # the default repair


async def test_a_repair_into_a_text_part_reads_as_the_assistants_words(
    api: httpx.AsyncClient, service: ThinkService, fake_model: FakeOpenAIServer, cid: str
) -> None:
    """The spec's `ask_user` example: `repair_interrupted_tool_part` answers a text part for an
    unanswered client-tool question (it raised `KeyError` in the transcript and ended the turn
    `error`); the model reads the question as the assistant's words, with no call left open."""
    conv = service.conversation(Fragile, cid)
    asked = {
        "type": "tool-ask_user",
        "toolCallId": "call_ask",
        "state": "input-available",
        "input": {"prompt": "Which city do you mean?"},
    }
    await conv.add_messages(
        [
            UIMessage.user_text("weather?"),
            UIMessage(role="assistant", parts=[{"type": "step-start"}, asked]),
        ]
    )
    await completes(api, "fragile", cid, "Oslo")
    [request] = fake_model.requests(cid)
    messages = request["body"]["messages"]
    assert messages[1:] == [
        {"role": "user", "content": "weather?"},
        {"role": "assistant", "content": "Which city do you mean?"},
        {"role": "user", "content": "Oslo"},
    ]


async def test_get_tools_raising_in_the_tool_call_ends_the_turn(
    api: httpx.AsyncClient, service: ThinkService, fake_model: FakeOpenAIServer, cid: str
) -> None:
    """Outside the model step (which catches it), the failure is not retried either."""
    conv = service.conversation(Fragile, cid)
    await conv.configure({"break": "get_tools", "in": "think.tool_call"})
    fake_model.script(cid, tool_call("add", {"a": 1, "b": 2}))
    await failed_turn(api, "fragile", cid)
    assert fake_model.calls(cid) == 1

    await conv.configure({})
    await completes(api, "fragile", cid, "again")


async def test_admission_and_listing_survive_a_raising_get_tools(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    """The gateway runs `get_tools` to check client tool names, and `get_model` and
    `get_tools` to list agents: neither answers 500."""
    client_tools = {"client_tools": [{"name": "pick_color", "description": "Ask the user."}]}
    turn = await failed_turn(api, "wrecked", cid, client_tools)
    assert "pick_color" not in turn["error"]
    await failed_turn(api, "wrecked", cid, {"mode": "submit"})
    assert fake_model.calls(cid) == 0

    listed = await api.get("/v1/agents")
    assert listed.status_code == 200, listed.text
    agents = {a["name"]: a for a in listed.json()["agents"]}
    assert agents["wrecked"]["model"] == "" and agents["wrecked"]["tools"] == []
    assert agents["fragile"]["model"] == "scripted-model"
    assert OVERRIDE_SECRET not in listed.text
