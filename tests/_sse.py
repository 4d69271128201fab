"""Reading SSE responses in tests, byte for byte as a client receives them."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx


@dataclass
class Event:
    id: int | None
    data: str

    @property
    def chunk(self) -> dict[str, Any]:
        value: dict[str, Any] = json.loads(self.data)
        return value


def parse(body: str) -> list[Event]:
    events: list[Event] = []
    for block in body.replace("\r\n", "\n").split("\n\n"):
        event_id: int | None = None
        data: list[str] = []
        for line in block.split("\n"):
            if line.startswith("id:"):
                event_id = int(line[3:].strip())
            elif line.startswith("data:"):
                data.append(line[5:].lstrip(" "))
        if data:
            events.append(Event(event_id, "\n".join(data)))
    return events


async def read_stream(
    api: httpx.AsyncClient,
    url: str,
    *,
    last_event_id: int | None = None,
    opened: Callable[[], None] | None = None,
) -> tuple[str, list[Event]]:
    """The whole stream; `opened()` is called once the response has begun (the stream is
    being served), for a test that waits until its readers are all connected."""
    headers = {} if last_event_id is None else {"Last-Event-ID": str(last_event_id)}
    async with api.stream("GET", url, headers=headers) as response:
        assert response.status_code == 200, await response.aread()
        assert response.headers["x-vercel-ai-ui-message-stream"] == "v1"
        if opened is not None:
            opened()
        body = (await response.aread()).decode()
    return body, parse(body)


def chunks(events: list[Event]) -> list[dict[str, Any]]:
    return [e.chunk for e in events if e.data != "[DONE]"]


async def read_until(
    api: httpx.AsyncClient, url: str, done: Callable[[list[dict[str, Any]]], bool]
) -> list[dict[str, Any]]:
    """Follow a stream until `done(chunks so far)`, then drop the connection. A stream that
    ends first fails the test: what it meant to do at that point (kill a worker mid-stream,
    say) would happen after the turn, and the test would check something else."""
    got: list[dict[str, Any]] = []
    async with api.stream("GET", url) as response:
        buffer = ""
        async for piece in response.aiter_text():
            buffer += piece
            got = chunks(parse(buffer))
            if done(got):
                return got
    raise AssertionError(f"the stream ended before the point the test waited for: {got}")


def deltas(at_least: int) -> Callable[[list[dict[str, Any]]], bool]:
    return lambda got: sum(1 for c in got if c["type"] == "text-delta") >= at_least


async def until_terminal(api: httpx.AsyncClient, url: str, seconds: float = 60) -> dict[str, Any]:
    """Poll a turn until it has ended."""
    deadline = asyncio.get_running_loop().time() + seconds
    while True:
        turn: dict[str, Any] = (await api.get(url)).json()
        if turn["status"] not in ("pending", "running"):
            return turn
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"turn still {turn['status']} after {seconds} s: {turn}")
        await asyncio.sleep(0.05)


def started(chunk: dict[str, Any]) -> dict[str, Any]:
    """A `start` chunk without which turn wrote it (`messageMetadata`: `turnId`, `agent`,
    `createdAt`, which it always carries: tests/turns/test_turn_e2e.py checks them), for a test
    of the rest."""
    assert chunk["type"] == "start" and {"turnId", "agent", "createdAt"} <= set(
        chunk["messageMetadata"]
    ), chunk
    return {k: v for k, v in chunk.items() if k != "messageMetadata"}


def finished(chunk: dict[str, Any]) -> dict[str, Any]:
    """A `finish` chunk without what the turn spent (`messageMetadata.usage`, which it always
    carries: tests/models/test_usage.py checks its figures), for a test of the rest."""
    assert chunk["type"] == "finish" and "usage" in chunk["messageMetadata"], chunk
    return {k: v for k, v in chunk.items() if k != "messageMetadata"}
