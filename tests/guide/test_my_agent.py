"""Testing an agent of your own: the complete example of docs/testing.md, run by the suite.

The stack is real (embedded Postgres and Temporal, the worker in this process); only the model
is scripted, by `think.testing.FakeOpenAIServer`, an OpenAI-compatible server on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator

import pytest

from think import ThinkService
from think.dev import Services, start_services
from think.server import Settings, run_worker
from think.storage import migrate
from think.testing import FakeOpenAIServer, text, tool_call

AGENT = "examples.assistant:Assistant"  # "module:Class", as THINK_AGENTS names it


@pytest.fixture(scope="module")
def model() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as server:
        yield server


@pytest.fixture(scope="module")
def services(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Services]:
    # Postgres and Temporal of their own, in a fresh directory, stopped at the end.
    with start_services(tmp_path_factory.mktemp("think")) as running:
        yield running


@pytest.fixture(scope="module")
async def service(services: Services, model: FakeOpenAIServer) -> AsyncIterator[ThinkService]:
    settings = services.settings(
        Settings(
            agents=[AGENT],
            task_queue="my-agent-tests",
            openai_base_url=model.base_url,  # every model call goes to the scripted server
            openai_api_key="test-key",
        )
    )
    await migrate(settings)
    worker = asyncio.create_task(run_worker(settings))
    try:
        async with await ThinkService.connect(settings) as connected:
            yield connected
    finally:
        worker.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await worker


async def test_the_assistant_looks_up_the_weather(
    service: ThinkService, model: FakeOpenAIServer
) -> None:
    # Two model calls in this conversation: the first asks for the tool, the second answers.
    model.script(
        "oslo-weather",
        tool_call("get_weather", {"city": "Oslo"}),
        text("Sunny in Oslo, 21 °C."),
    )
    conversation = service.conversation("assistant", "oslo-weather")

    result = await conversation.run_turn("What's the weather in Oslo?")

    assert result.status == "completed"
    assert result.message is not None
    [tool] = [p for p in result.message.parts if p["type"] == "tool-get_weather"]
    assert tool["output"] == {"city": "Oslo", "temp_c": 21, "conditions": "sunny"}
    assert result.message.parts[-1]["text"] == "Sunny in Oslo, 21 °C."
    assert model.pending("oslo-weather") == 0  # the agent used every scripted reply
    # What the agent sent: the tool's result went back to the model in the second call.
    second = model.requests("oslo-weather")[1]["body"]["messages"]
    assert second[-1]["role"] == "tool" and "sunny" in second[-1]["content"]


async def test_a_conversation_with_nothing_scripted_hears_an_echo(service: ThinkService) -> None:
    result = await service.conversation("assistant", "unscripted").run_turn("Hello there")
    assert result.message is not None
    assert result.message.parts[-1]["text"] == "echo: Hello there"
