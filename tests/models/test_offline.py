"""With no model configured, the bundled agent answers through the offline model."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import httpx
import pytest
from temporalio.client import Client

from tests._stack import Stack, own_stack, stack_env
from think.dev import Services
from think.models import ModelRequest, OfflineModel
from think.models._base import TextDelta
from think.workflows.names import turn_workflow_id


@pytest.fixture(scope="module")
def offline_stack(services: Services, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    logs = tmp_path_factory.mktemp("offline")
    env = stack_env(
        database_url=services.database_url,
        temporal_address=services.temporal_address,
        task_queue="think-offline",
        agents="examples.assistant:Assistant",
        model_url=None,  # no OPENAI_BASE_URL, no OPENAI_API_KEY
        home=logs,
    )
    env.pop("THINK_AGENTS")  # and the default agents: the bundled example
    with own_stack(env, logs) as stack:
        yield stack


async def test_offline_model_says_so(offline_stack: Stack, cid: str) -> None:
    async with httpx.AsyncClient(base_url=offline_stack.api_url, timeout=30) as api:
        turn = (
            await api.post(
                f"/v1/agents/assistant/conversations/{cid}/turns",
                json={"input": "Hello!", "mode": "wait"},
            )
        ).json()
        assert turn["status"] == "completed", turn
        answer = turn["message"]["parts"][-1]["text"]
        assert "offline model" in answer
        assert "You said: Hello!" in answer
        stored = (await api.get(f"/v1/agents/assistant/conversations/{cid}/messages")).json()
        assert stored["messages"][-1]["parts"][-1]["text"] == answer


async def test_the_agent_listing_says_the_offline_model_serves(offline_stack: Stack) -> None:
    """Issue 19: /v1/agents said `gpt-4o-mini` while the offline model answered."""
    async with httpx.AsyncClient(base_url=offline_stack.api_url, timeout=30) as api:
        (assistant,) = (await api.get("/v1/agents")).json()["agents"]
    assert (assistant["model"], assistant["served_by"]) == ("gpt-4o-mini", "offline")


async def test_the_readme_approval_round_trip_offline(
    offline_stack: Stack, temporal: Client, cid: str
) -> None:
    """README "A turn that waits for a person", with no model configured."""
    async with httpx.AsyncClient(base_url=offline_stack.api_url, timeout=30) as api:
        base = f"/v1/agents/assistant/conversations/{cid}"
        body = {"input": '/call delete_file {"path": "notes.txt"}', "mode": "wait"}
        turn = (await api.post(f"{base}/turns", json=body)).json()
        assert turn["status"] == "awaiting_approval", turn
        [pending] = turn["pending_approvals"]
        assert (pending["tool_name"], pending["input"]) == ("delete_file", {"path": "notes.txt"})
        handle = temporal.get_workflow_handle(turn_workflow_id("assistant", cid, turn["turn_id"]))
        await handle.signal("approve", {"approval_id": pending["approval_id"], "approved": True})
        for _ in range(100):
            final = (await api.get(turn["status_url"])).json()
            if final["status"] == "completed":
                break
            await asyncio.sleep(0.1)
        assert final["status"] == "completed", final
        answer = final["message"]["parts"][-1]["text"]
        assert answer == "Offline model: the tools answered. delete_file: deleted notes.txt."
        unknown = {"input": "/call nope {}", "mode": "wait"}
        turn = (await api.post(f"{base}/turns", json=unknown)).json()
        assert "There is no tool named 'nope'" in turn["message"]["parts"][-1]["text"]


async def test_a_denied_tool_is_reported_with_one_full_stop() -> None:
    """Issue 19: the offline model said "The tool call was denied.." after a denial."""
    call = {"id": "c1", "type": "function", "function": {"name": "delete_file", "arguments": "{}"}}
    messages = [
        {"role": "user", "content": "/call delete_file {}"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "The tool call was denied."},
    ]
    events = [e async for e in OfflineModel().stream(ModelRequest(model="m", messages=messages))]
    said = "".join(e.delta for e in events if isinstance(e, TextDelta))
    assert said.endswith("delete_file: The tool call was denied."), said
    assert ".." not in said
