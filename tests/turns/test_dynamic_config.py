"""Dynamic configuration: `configure(config)` / `get_config()` per conversation, read by
`get_model`, by hooks and by tools (`ToolContext.config`); the `configured` agent in
tests/agents.py reads it everywhere."""

from __future__ import annotations

import json

import httpx
import pytest

from tests.agents import Configured
from think import ThinkService, UserError
from think.testing import FakeOpenAIServer, text, tool_call


async def test_the_configuration_reaches_get_model_hooks_and_tools(
    service: ThinkService, fake_model: FakeOpenAIServer, cid: str
) -> None:
    conv = service.conversation(Configured, cid)
    assert await conv.get_config() == {}
    config = {"model": "gold-model", "tier": "gold", "limits": {"daily": 3}}
    await conv.configure(config)
    assert await conv.get_config() == config

    fake_model.script(cid, tool_call("show_config", {}, id="c1"), text("Done."))
    assert (await conv.run_turn("What is my tier?")).status == "completed"
    first, second = (r["body"] for r in fake_model.requests(cid))
    assert first["model"] == "gold-model"  # get_model
    assert first["messages"][0]["content"] == "You are a test agent. Tier: gold."  # before_turn
    assert json.loads(second["messages"][-1]["content"]) == config  # ToolContext.config


async def test_a_tool_configures_its_own_conversation(
    service: ThinkService, fake_model: FakeOpenAIServer, cid: str
) -> None:
    conv = service.conversation(Configured, cid)
    fake_model.script(
        cid,
        tool_call("set_tier", {"tier": "silver"}, id="c1"),
        tool_call("show_config", {}, id="c2"),
        text("Now silver."),
        text("Still silver."),
    )
    await conv.run_turn("Upgrade me.")
    assert await conv.get_config() == {"tier": "silver"}
    await conv.run_turn("And?")
    requests = [r["body"] for r in fake_model.requests(cid)]
    # The tool after the change reads it; before_turn ran before it, so the next turn does.
    assert json.loads(requests[2]["messages"][-1]["content"]) == {"tier": "silver"}
    assert requests[0]["messages"][0]["content"] == "You are a test agent."
    assert requests[3]["messages"][0]["content"] == "You are a test agent. Tier: silver."
    assert requests[3]["model"] == "scripted-model"


async def test_configurations_are_checked_and_per_conversation(
    service: ThinkService, cid: str
) -> None:
    conv = service.conversation(Configured, cid)
    with pytest.raises(UserError, match="JSON object"):
        await conv.configure(["not", "an", "object"])  # type: ignore[arg-type]
    with pytest.raises(UserError, match="not JSON"):
        await conv.configure({"when": object()})
    await conv.configure({"tier": "gold"})
    await conv.configure({"model": "m"})  # replaces, does not merge
    assert await conv.get_config() == {"model": "m"}
    assert await service.conversation(Configured, f"{cid}-other").get_config() == {}
    assert await service.conversation("helper", cid).get_config() == {}


async def test_outside_a_conversation(api: httpx.AsyncClient) -> None:
    agent = Configured()
    assert agent.get_config() == {}
    assert agent.get_model() == "scripted-model"
    with pytest.raises(UserError, match="only inside a turn"):
        await agent.configure({"tier": "gold"})
    # Listing the agents asks get_model of an agent bound to no conversation.
    listed = (await api.get("/v1/agents")).json()["agents"]
    assert next(a for a in listed if a["name"] == "configured")["model"] == "scripted-model"
