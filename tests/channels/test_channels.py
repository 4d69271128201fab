"""Channels (issue 34): a turn's channel is who it came from (`TurnRequest.channel`); the
agent `channeled` declares "slack" (its own instructions, one tool) and "sms" (one step). Turns
on a channel are admitted as a messenger admits them (`admit_submission(channel=...)`), on a
worker of their own; /v1's turns are "web". The scripted model records what it was sent."""

from __future__ import annotations

import secrets
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from temporalio.client import Client

from tests._stack import Stack, own_stack
from tests._turn_helpers import tool_part, until_status, wait_turn
from tests.webhook_agents import Channeled, TwinChannels, UnknownTool, Unsigned
from think import ThinkService
from think._settings import Settings
from think.agent import AgentRegistry, ChannelError, messages_of
from think.engine import check_agents
from think.testing import FakeOpenAIServer, text, tool_call
from think.turns import admit_submission
from think.webhooks import WebhookError

QUEUE = f"think-channels-{secrets.token_hex(3)}"
AGENT = "channeled"
ENDED = {"completed", "error", "interrupted", "aborted"}


@pytest.fixture(scope="module")
def channels_stack(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    env = {**stack.env, "THINK_TASK_QUEUE": QUEUE, "THINK_AGENTS": "tests.webhook_agents:Channeled"}
    with own_stack(env, tmp_path_factory.mktemp("channels")) as own:
        yield own


@pytest.fixture
async def api(channels_stack: Stack) -> Any:
    async with httpx.AsyncClient(base_url=channels_stack.api_url, timeout=60) as client:
        yield client


async def _on_channel(
    api: httpx.AsyncClient,
    service: ThinkService,
    temporal: Client,
    cid: str,
    channel: str,
    said: str,
) -> dict[str, Any]:
    admission = await admit_submission(
        service.store,
        temporal,
        QUEUE,
        Channeled,
        tenant="default",
        conversation_id=cid,
        messages=messages_of(said),
        input=said,
        channel=channel,
    )
    assert admission.turn.request.channel == channel
    url = f"/v1/agents/{AGENT}/conversations/{cid}/turns/{admission.turn.id}"
    return await until_status(api, url, ENDED, within=60)


def _sent(fake_model: FakeOpenAIServer, cid: str, call: int) -> tuple[str, list[str]]:
    """The system prompt and the tool names of the model's `call`-th request."""
    body = fake_model.requests(cid)[call]["body"]
    system = next(m["content"] for m in body["messages"] if m["role"] == "system")
    return system, sorted(t["function"]["name"] for t in body.get("tools") or [])


async def test_a_channel_adds_its_instructions_and_offers_its_tools_only(
    api: httpx.AsyncClient,
    service: ThinkService,
    temporal: Client,
    fake_model: FakeOpenAIServer,
    cid: str,
) -> None:
    fake_model.script(
        cid,
        tool_call("get_weather", {"city": "Paris"}, id="call_w"),
        text("No weather here."),
    )
    turn = await _on_channel(api, service, temporal, cid, "slack", "weather in Paris?")
    assert turn["status"] == "completed", turn
    system, tools = _sent(fake_model, cid, 0)
    assert system == "You are a test agent.\n\nAnswer in Slack's style: short."
    assert tools == ["add"]
    # The model named a tool the channel does not offer: refused, as a tool error.
    part = tool_part(turn, "call_w")
    assert part["state"] == "output-error"
    assert "no tool named 'get_weather'" in part["errorText"]

    # /v1's turns are "web": the agent's own prompt and every tool.
    fake_model.script(cid, text("Sunny."))
    await wait_turn(api, AGENT, cid, "and now?", status="completed")
    system, tools = _sent(fake_model, cid, 2)
    assert system == "You are a test agent."
    assert tools == ["add", "get_weather"]


async def test_a_channel_limits_the_steps_of_its_turns(
    api: httpx.AsyncClient,
    service: ThinkService,
    temporal: Client,
    fake_model: FakeOpenAIServer,
    cid: str,
) -> None:
    fake_model.script(cid, tool_call("add", {"a": 2, "b": 3}, id="call_a"), text("5"))
    turn = await _on_channel(api, service, temporal, cid, "sms", "2+3?")
    assert turn["status"] == "completed", turn
    assert fake_model.calls(cid) == 1  # "sms" allows one step: the tool's result ends it
    assert tool_part(turn, "call_a")["output"] == 5


@pytest.mark.parametrize(
    ("agent", "error", "words"),
    [
        (TwinChannels, ChannelError, "declares the channel 'slack' twice"),
        (UnknownTool, ChannelError, "allows tools it does not have: 'launch_rockets'"),
        (Unsigned, WebhookError, "$THINK_TEST_NEVER_SET, which is not set"),
    ],
)
def test_a_bad_declaration_stops_the_worker(agent: type, error: type, words: str) -> None:
    with pytest.raises(error) as raised:
        check_agents(AgentRegistry([agent]), Settings(), {})
    assert words in str(raised.value)


def test_deployment_webhooks_need_their_secret() -> None:
    settings = Settings.from_env(
        {"THINK_WEBHOOK_URLS": "https://hooks.example.com/x"}, find_dev_stack=False
    )
    with pytest.raises(WebhookError, match="THINK_WEBHOOK_SECRET is not"):
        check_agents(AgentRegistry([Channeled]), settings, {})


def test_think_worker_refuses_to_start_with_a_bad_channel(root: Path, tmp_path: Path) -> None:
    """Checked before the worker connects to anything: one line, exit 2."""
    env = {
        "PATH": "/usr/bin:/bin",
        "THINK_DATABASE_URL": "postgresql://nobody@127.0.0.1:1/none",
        "TEMPORAL_ADDRESS": "127.0.0.1:1",
        "THINK_AGENTS": "tests.webhook_agents:TwinChannels",
        "THINK_HOME": str(tmp_path),
    }
    result = subprocess.run(
        [sys.executable, "-m", "think", "worker"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert "declares the channel 'slack' twice" in result.stderr
