"""Tools written as async generators: each yield streams as a preliminary tool output (the AI
SDK's `preliminary: true`, shown in place of the one before), the last is the result the model
reads and the turn stores. They were not run at all: the model read
`"<async_generator object …>"`."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx

from tests._sse import chunks, read_stream
from tests._stack import Stack
from tests._turn_helpers import wait_turn
from think import tool
from think.testing import FakeOpenAIServer, text, tool_call


@tool
async def steps(n: int) -> AsyncIterator[dict[str, int]]:
    """Yields its progress, then its result."""
    for i in range(n):
        yield {"done": i}
    yield {"done": n, "of": n}


async def test_a_generator_tool_streams_and_its_last_yield_is_the_result() -> None:
    assert steps.streams
    assert [v async for v in steps.stream(None, n=2)] == [
        {"done": 0},
        {"done": 1},
        {"done": 2, "of": 2},
    ]
    assert await steps(None, n=2) == {"done": 2, "of": 2}  # called directly: the result
    assert "n" in steps.spec.parameters["properties"]


async def test_a_streaming_tool_on_the_stack_shows_each_yield_and_keeps_the_last(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, stack: Stack, cid: str
) -> None:
    fake_model.script(cid, tool_call("countdown", {"start": 3}, id="call_cd"), text("Off we go."))
    done = await wait_turn(api, "streamer", cid, "count down", wait_timeout=30)
    assert done["status"] == "completed", done
    [part] = [p for p in done["message"]["parts"] if p["type"] == "tool-countdown"]
    assert (part["state"], part["output"]) == ("output-available", "liftoff")
    # The model read the result, not the generator.
    second = fake_model.requests(cid)[1]["body"]["messages"]
    assert {"role": "tool", "tool_call_id": "call_cd", "content": "liftoff"} in second

    _, events = await read_stream(api, done["stream_url"])
    outputs = [
        (c["output"], bool(c.get("preliminary")))
        for c in chunks(events)
        if c["type"] == "tool-output-available" and c["toolCallId"] == "call_cd"
    ]
    assert outputs == [
        ("3...", True),
        ("2...", True),
        ("1...", True),
        ("liftoff", True),
        ("liftoff", False),
    ]
    runs = Path(stack.env["THINK_HOME"]) / f"countdown-{done['turn_id']}"
    assert runs.read_text().splitlines() == ["run"]
