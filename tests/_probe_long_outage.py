"""Postgres or Temporal restarted mid-turn: the turn completes once both are back.

These tests stop real servers, so they run on services of their own (embedded Postgres, a
Temporal dev server on a fixed port, a fake model, a worker and a gateway), never on the
session's. Postgres comes back on the same data directory (so on the same socket), Temporal on
the same port and the same SQLite file, exactly as an operator's restart would.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from datetime import datetime
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from temporalio.client import Client, WorkflowExecutionStatus

from tests._sse import Event, chunks, parse, read_stream
from tests._stack import Stack, free_port, stack_env
from think._embedded import (
    EmbeddedPostgres,
    TemporalDevServer,
    start_embedded,
    start_postgres,
    start_temporal,
)
from think._settings import Settings
from think._temporal import connect
from think.storage import migrate_now
from think.testing import FakeOpenAIServer, reply, text
from think.workflows._names import conversation_workflow_id, turn_workflow_id

WORDS = [f"word{i} " for i in range(60)]  # ~3 s of streaming at 0.05 s per chunk
ANSWER = "".join(WORDS)
DOWN_FOR = 25.0
"""How long a service stays down: longer than several retry intervals, short of the budget."""


@dataclass
class Infra:
    """Services of this module only; the restart methods swap in the new server handles."""

    home: Path
    temporal_port: int
    postgres: EmbeddedPostgres
    temporal: TemporalDevServer
    fake: FakeOpenAIServer
    stack: Stack = field(init=False)
    timeline: list[str] = field(default_factory=list)

    def note(self, what: str) -> None:
        """Record a step with its time, for the report of a failed test."""
        self.timeline.append(f"{datetime.now():%H:%M:%S.%f} {what}")

    @property
    def settings(self) -> Settings:
        return Settings(
            agents=["tests.agents:Helper"],
            task_queue="think-infra",
            database_url=self.postgres.url,
            temporal_address=self.temporal.address,
            home=self.home,
        )

    def restart_postgres(self, down: float = DOWN_FOR) -> None:
        self.note("stopping Postgres")
        self.postgres.stop()
        self.note("Postgres stopped")
        time.sleep(down)
        self.postgres = start_postgres(self.home / "pg")
        self.note("Postgres is back")

    def restart_temporal(self, down: float = DOWN_FOR) -> None:
        self.note("stopping Temporal")
        self.temporal.stop()
        self.note("Temporal stopped")
        time.sleep(down)
        self.temporal = start_temporal(
            self.home / "temporal.db", port=self.temporal_port, ui_port=None
        )
        self.note("Temporal is back")

    def log_tails(self, n: int = 40) -> str:
        parts = ["--- timeline ---", *self.timeline]
        parts += [f"--- {p.name} ({p.log}) ---\n{p.log_tail(n)}" for p in self.stack.processes]
        parts.append(f"--- temporal ({self.temporal.log_file}) ---\n{self.temporal.log_tail()}")
        pg_log = self.home / "pg" / "log"
        with contextlib.suppress(OSError):
            tail = "\n".join(pg_log.read_text(errors="replace").splitlines()[-n:])
            parts.append(f"--- postgres ({pg_log}) ---\n{tail}")
        return "\n".join(parts)

    @contextlib.contextmanager
    def logs_on_failure(self) -> Iterator[None]:
        try:
            yield
        except BaseException:
            print(self.log_tails())  # pytest shows a failed test's output
            raise


@pytest.fixture(scope="module")
def infra(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Infra]:
    home = tmp_path_factory.mktemp("infra")
    port = free_port()  # fixed from here on, so Temporal can come back on it
    postgres, temporal = start_embedded(home, temporal_port=port, ui_port=None)
    assert postgres is not None and temporal is not None
    fake = FakeOpenAIServer()
    running = Infra(home, port, postgres, temporal, fake)
    try:
        fake.start()
        migrate_now(running.settings)
        logs = home / "logs"
        logs.mkdir()
        env = stack_env(
            database_url=postgres.url,
            temporal_address=temporal.address,
            task_queue=running.settings.task_queue,
            agents="tests.agents:Helper",
            model_url=fake.base_url,
            home=logs,
        )
        running.stack = Stack(env=env, logs=logs)
        running.stack.start_worker()
        running.stack.start_api()
        yield running
    finally:
        if hasattr(running, "stack"):
            running.stack.stop()
        fake.stop()
        running.temporal.terminate()  # overlap Temporal's shutdown with Postgres's
        try:
            running.postgres.stop()
        finally:
            running.temporal.stop()


# --------------------------------------------------------------------------- helpers


async def until_streaming(api: httpx.AsyncClient, stream_url: str, deltas: int = 5) -> None:
    """Return once the turn has streamed `deltas` text deltas: the model step is mid-answer."""
    async with asyncio.timeout(20), api.stream("GET", stream_url) as response:
        assert response.status_code == 200
        buffer = ""
        async for piece in response.aiter_text():
            buffer += piece
            if sum(1 for c in chunks(parse(buffer)) if c["type"] == "text-delta") >= deltas:
                return
    raise AssertionError(f"the stream ended before {deltas} text deltas:\n{buffer}")


async def until_terminal(api: httpx.AsyncClient, url: str, timeout: float = 40) -> dict[str, Any]:
    """Poll the turn, tolerating a gateway that cannot reach Postgres for the moment."""
    last: object = None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            response = await api.get(url)
        except httpx.HTTPError as exc:  # refused, reset, timed out
            last = exc
        else:
            last = (response.status_code, response.text[:300])
            if response.status_code == 200:
                turn: dict[str, Any] = response.json()
                if turn["status"] not in ("pending", "running"):
                    return turn
        await asyncio.sleep(0.2)
    raise AssertionError(f"the turn did not end within {timeout} s; last answer: {last!r}")


async def until_ready(api: httpx.AsyncClient, timeout: float = 20) -> None:
    last: object = None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            response = await api.get("/readyz")
            last = (response.status_code, response.text)
            if response.status_code == 200:
                return
        except httpx.HTTPError as exc:
            last = exc
        await asyncio.sleep(0.2)
    raise AssertionError(f"/readyz not 200 within {timeout} s; last answer: {last!r}")


def visible_text(events: list[Event]) -> str:
    """The answer a client keeps: `reset-step` drops what the step streamed before it."""
    kept: list[str] = []
    for chunk in chunks(events):
        if chunk["type"] == "reset-step":
            kept = []
        elif chunk["type"] == "text-delta":
            kept.append(chunk["delta"])
    return "".join(kept)


async def assert_completed_once(
    infra: Infra, api: httpx.AsyncClient, cid: str, turn: dict[str, Any]
) -> dict[str, Any]:
    """The turn's end state, whatever happened on the way: completed, stored once, streamed."""
    final = await until_terminal(api, turn["status_url"])
    infra.note(f"turn {final['status']} in Postgres; model calls: {infra.fake.calls(cid)}")
    assert final["status"] == "completed", final
    assert final["message"]["parts"] == [
        {"type": "step-start"},
        {"type": "text", "text": ANSWER, "state": "done"},
    ]
    messages = (await api.get(f"/v1/agents/helper/conversations/{cid}/messages")).json()
    answers = [m for m in messages["messages"] if m["role"] == "assistant"]
    assert [m["id"] for m in answers] == [turn["message_id"]], answers
    assert answers[0]["parts"] == final["message"]["parts"]

    body, events = await read_stream(api, turn["stream_url"])
    assert events[-1].data == "[DONE]", body[-500:]
    assert chunks(events)[-1]["type"] == "finish", body[-500:]
    assert [c["type"] for c in chunks(events)].count("finish") == 1
    assert visible_text(events) == ANSWER

    # Temporal agrees: the turn's workflow completed (not merely its row in Postgres).
    client = await connect(infra.settings)
    handle = client.get_workflow_handle(turn_workflow_id("helper", cid, turn["turn_id"]))
    async with asyncio.timeout(30):
        await handle.result()
    infra.note("turn workflow completed in Temporal")
    await until_ready(api)
    infra.note("/readyz 200")
    return final


async def assert_conversation_still_works(
    infra: Infra, api: httpx.AsyncClient, cid: str
) -> None:
    """The conversation's entity workflow took the turn's end and serves the next turn."""
    infra.fake.reset()  # drop the repeating script of the turn before (the fake is ours alone)
    infra.fake.script(cid, reply(text("after the restart")))
    base = f"/v1/agents/helper/conversations/{cid}"
    turn = (await api.post(f"{base}/turns", json={"input": "again"})).json()
    final = await until_terminal(api, turn["status_url"], timeout=20)
    assert final["status"] == "completed", final
    assert final["message"]["parts"][-1]["text"] == "after the restart"
    client: Client = await connect(infra.settings)
    conversation = client.get_workflow_handle(conversation_workflow_id("default", "helper", cid))
    assert (await conversation.describe()).status == WorkflowExecutionStatus.RUNNING
    infra.note("the next turn completed")
    print("\n".join(infra.timeline))


# --------------------------------------------------------------------------- tests


async def test_postgres_restart_mid_turn_the_turn_completes(infra: Infra, cid: str) -> None:
    slow = reply(text(*WORDS), delay=0.05)
    infra.fake.script(cid, slow, repeat=True)  # a step cut by the outage asks the model again
    with infra.logs_on_failure():
        async with httpx.AsyncClient(base_url=infra.stack.api_url, timeout=15) as api:
            response = await api.post(
                f"/v1/agents/helper/conversations/{cid}/turns", json={"input": "tell me"}
            )
            assert response.status_code == 202, response.text
            turn = response.json()
            infra.note("turn submitted")
            await until_streaming(api, turn["stream_url"])
            infra.note("turn streaming")

            url = infra.postgres.url
            await asyncio.to_thread(infra.restart_postgres)
            assert infra.postgres.url == url  # same data dir, same socket: clients reconnect

            await assert_completed_once(infra, api, cid, turn)
            # The outage cut the step: it was retried, and the stream says so (`reset-step`).
            assert infra.fake.calls(cid) >= 2
            await assert_conversation_still_works(infra, api, cid)


async def test_temporal_restart_mid_turn_the_turn_completes(infra: Infra, cid: str) -> None:
    slow = reply(text(*WORDS), delay=0.05)
    infra.fake.script(cid, slow, repeat=True)
    with infra.logs_on_failure():
        async with httpx.AsyncClient(base_url=infra.stack.api_url, timeout=15) as api:
            response = await api.post(
                f"/v1/agents/helper/conversations/{cid}/turns", json={"input": "tell me"}
            )
            assert response.status_code == 202, response.text
            turn = response.json()
            infra.note("turn submitted")
            await until_streaming(api, turn["stream_url"])
            infra.note("turn streaming")

            address = infra.temporal.address
            await asyncio.to_thread(infra.restart_temporal)
            assert infra.temporal.address == address

            await assert_completed_once(infra, api, cid, turn)
            await assert_conversation_still_works(infra, api, cid)
