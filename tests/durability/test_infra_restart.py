"""Postgres or Temporal restarted mid-turn: the turn completes once both are back.

These tests stop real servers, so they run on services of their own (embedded Postgres, a
Temporal dev server on a fixed port, a fake model, a worker and a gateway), never on the
session's. Postgres comes back on the same data directory (so on the same socket), Temporal on
the same port and the same SQLite file, exactly as an operator's restart would. Worker and
gateway are never restarted: they have to find their way back on their own.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests._sse import Event, chunks, parse, read_stream
from tests._stack import Stack, free_port, stack_env
from tests._turn_helpers import activity_attempts
from think._settings import Settings
from think.dev import (
    EmbeddedPostgres,
    TemporalDevServer,
    start_embedded,
    start_postgres,
    start_temporal,
)
from think.storage import migrate_now
from think.testing import FakeOpenAIServer, reply, text
from think.workflows import connect
from think.workflows.names import turn_workflow_id

WORDS = [f"word{i} " for i in range(60)]  # ~3 s of streaming at 0.05 s per chunk
LONG_WORDS = [f"long{i} " for i in range(200)]  # ~10 s: still streaming when Temporal is back
HEARTBEAT_TIMEOUT = 5.0
"""How long a step's worker may go unheard: the turn's workflow task timeout (`TASK_TIMEOUT`
in think/turns/_dispatch.py; the steps are local activities, kept alive by their workflow
task, not by heartbeats of their own)."""
DOWN_FOR = HEARTBEAT_TIMEOUT + 1
"""How long Postgres stays down: longer than an attempt can wait for a connection without
heartbeating, so the step needs more than one retry to get through."""


@dataclass
class Infra:
    """Services of this module only; a restart swaps in the new server's handle."""

    home: Path
    temporal_port: int
    postgres: EmbeddedPostgres
    temporal: TemporalDevServer
    fake: FakeOpenAIServer
    stack: Stack = field(init=False)
    timeline: list[str] = field(default_factory=list)
    tasks: list[asyncio.Task[None]] = field(default_factory=list)
    """Background clients of the running test, cancelled when it ends."""

    @property
    def settings(self) -> Settings:
        return Settings(
            agents=["tests.agents:Helper"],
            task_queue="think-infra",
            database_url=self.postgres.url,
            temporal_address=self.temporal.address,
            home=self.home,
        )

    def note(self, what: str) -> None:
        """Record a step with its time, for the report of a failed test."""
        self.timeline.append(f"{datetime.now():%H:%M:%S.%f} {what}")

    @contextlib.asynccontextmanager
    async def postgres_down(self) -> AsyncIterator[None]:
        """Postgres is stopped (fast shutdown) inside the block and started again after it."""
        url = self.postgres.url
        self.note("stopping Postgres")
        await asyncio.to_thread(self.postgres.stop)
        self.note("Postgres stopped")
        try:
            yield
        finally:
            self.postgres = await asyncio.to_thread(start_postgres, self.home / "pg")
            self.note("Postgres is back")
        assert self.postgres.url == url  # same data dir, same socket: clients can reconnect

    @contextlib.asynccontextmanager
    async def temporal_down(self) -> AsyncIterator[None]:
        """The Temporal dev server is stopped inside the block and started again after it, on
        the same port and the same database file."""
        address = self.temporal.address
        self.note("stopping Temporal")
        await asyncio.to_thread(self.temporal.stop)
        self.note("Temporal stopped")
        try:
            yield
        finally:
            self.temporal = await asyncio.to_thread(
                start_temporal, self.home / "temporal.db", port=self.temporal_port, ui_port=None
            )
            self.note("Temporal is back")
        assert self.temporal.address == address

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
        self.timeline.clear()
        try:
            yield
        except BaseException:
            print(self.log_tails())  # pytest shows a failed test's output
            raise
        finally:
            for task in self.tasks:
                task.cancel()
            self.tasks.clear()
        print("\n".join(self.timeline))  # shown with `pytest -rP`


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
        processes = running.stack.processes if hasattr(running, "stack") else []
        for proc in reversed(processes):
            proc.stop()
        fake.stop()
        running.temporal.terminate()  # overlap Temporal's shutdown with Postgres's
        try:
            running.postgres.stop()
        finally:
            running.temporal.stop()
        alive = [p.name for p in processes if p.popen.poll() is None]
        alive += ["temporal"] if running.temporal.process.poll() is None else []
        alive += ["postgres"] if running.postgres.running else []
        assert not alive, f"still running after the module: {alive}"


@pytest.fixture
async def gateway(infra: Infra) -> AsyncIterator[httpx.AsyncClient]:
    """A client of this module's gateway (not the session's `api`)."""
    async with httpx.AsyncClient(base_url=infra.stack.api_url, timeout=15) as client:
        yield client


# --------------------------------------------------------------------------- helpers


async def submit(infra: Infra, api: httpx.AsyncClient, cid: str, words: list[str]) -> Any:
    # Repeat: a step cut by an outage asks the model again.
    infra.fake.script(cid, reply(text(*words), delay=0.05), repeat=True)
    response = await api.post(
        f"/v1/agents/helper/conversations/{cid}/turns", json={"input": "tell me"}
    )
    assert response.status_code == 202, response.text
    infra.note("turn submitted")
    return response.json()


@dataclass
class Follower:
    """A client reading a turn's stream live from its start. When the connection breaks (the
    gateway cannot read the log while Postgres is down) it comes back with `Last-Event-ID`, as
    a resuming AI SDK client does, until `[DONE]`."""

    api: httpx.AsyncClient
    url: str
    events: list[Event] = field(default_factory=list)
    reconnects: int = 0
    streaming: asyncio.Event = field(default_factory=asyncio.Event)
    """Set once 5 text deltas arrived: the model step is mid-answer."""
    task: asyncio.Task[None] | None = None

    def start(self, infra: Infra) -> Follower:
        self.task = asyncio.create_task(self._run())
        infra.tasks.append(self.task)
        return self

    async def until_streaming(self) -> None:
        async with asyncio.timeout(20):
            while not self.streaming.is_set():
                assert self.task is not None and not self.task.done(), self.events
                await asyncio.sleep(0.02)

    async def finish(self) -> list[Event]:
        assert self.task is not None
        async with asyncio.timeout(40):
            await self.task
        return self.events

    async def _run(self) -> None:
        connections = 0
        while not self.events or self.events[-1].data != "[DONE]":
            if connections:
                self.reconnects += 1
                await asyncio.sleep(0.2)
            connections += 1
            seen = [e.id for e in self.events if e.id is not None]
            headers = {"Last-Event-ID": str(seen[-1])} if seen else {}
            try:
                async with self.api.stream("GET", self.url, headers=headers) as response:
                    if response.status_code == 200:
                        await self._read(response)
            except httpx.HTTPError:  # the connection broke mid-stream, or was refused
                pass

    async def _read(self, response: httpx.Response) -> None:
        buffer = ""
        async for piece in response.aiter_text():
            complete, separator, buffer = (buffer + piece).rpartition("\n\n")
            if separator:
                self.events += parse(complete + separator)
                deltas = sum(1 for c in chunks(self.events) if c["type"] == "text-delta")
                if deltas >= 5:
                    self.streaming.set()


async def get_turn(api: httpx.AsyncClient, url: str) -> dict[str, Any]:
    response = await api.get(url)
    assert response.status_code == 200, response.text
    turn: dict[str, Any] = response.json()
    return turn


async def until_terminal(api: httpx.AsyncClient, url: str, within: float = 40) -> dict[str, Any]:
    """Poll the turn, tolerating a gateway that cannot reach Postgres for the moment (which
    must say so with a retryable 503, never a 500)."""
    last: object = None
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            response = await api.get(url)
        except httpx.HTTPError as exc:  # refused, reset, timed out
            last = exc
        else:
            last = (response.status_code, response.text[:300])
            assert_ok_or_unavailable(response)
            if response.status_code == 200:
                turn: dict[str, Any] = response.json()
                if turn["status"] not in ("pending", "running"):
                    return turn
        await asyncio.sleep(0.2)
    raise AssertionError(f"the turn did not end within {within} s; last answer: {last!r}")


def assert_ok_or_unavailable(response: httpx.Response) -> None:
    if response.status_code != 200:
        assert response.status_code == 503, response.text
        assert response.headers["content-type"] == "application/problem+json"
        assert response.headers["retry-after"] == "1"


async def answers_for(api: httpx.AsyncClient, url: str, seconds: float) -> list[int]:
    """GET `url` again and again for `seconds`; the status codes, or 0 for no answer in time
    (the gateway may wait for a connection while Postgres is down)."""
    codes: list[int] = []
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        try:
            response = await api.get(url, timeout=left)
        except httpx.TimeoutException:
            codes.append(0)
            break
        assert_ok_or_unavailable(response)
        codes.append(response.status_code)
        await asyncio.sleep(0.1)
    return codes


async def readiness(api: httpx.AsyncClient) -> tuple[int, Any]:
    response = await api.get("/readyz")
    return response.status_code, response.json()


async def until_ready(api: httpx.AsyncClient, within: float = 20) -> None:
    last: object = None
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            last = await readiness(api)
            if last[0] == 200:
                return
        except httpx.HTTPError as exc:
            last = exc
        await asyncio.sleep(0.2)
    raise AssertionError(f"/readyz not 200 within {within} s; last answer: {last!r}")


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
    infra: Infra,
    api: httpx.AsyncClient,
    cid: str,
    turn: dict[str, Any],
    answer: str,
    follower: Follower,
) -> tuple[list[Event], list[int]]:
    """The turn's end state, whatever happened on the way: completed, stored once, streamed
    once (as a client sees it, live or replayed), its workflow completed, the gateway ready."""
    final = await until_terminal(api, turn["status_url"])
    infra.note(f"turn {final['status']} in Postgres; model calls: {infra.fake.calls(cid)}")
    assert final["status"] == "completed", final
    assert final["message"]["parts"] == [
        {"type": "step-start"},
        {"type": "text", "text": answer, "state": "done"},
    ]
    messages = (await api.get(f"/v1/agents/helper/conversations/{cid}/messages")).json()
    answers = [m for m in messages["messages"] if m["role"] == "assistant"]
    assert [m["id"] for m in answers] == [turn["message_id"]], answers
    assert answers[0]["parts"] == final["message"]["parts"]

    body, events = await read_stream(api, turn["stream_url"])
    kinds = [c["type"] for c in chunks(events)]
    assert events[-1].data == "[DONE]", body[-500:]
    assert kinds[-1] == "finish", body[-500:]
    assert kinds.count("finish") == 1 and "abort" not in kinds and "error" not in kinds, kinds
    assert visible_text(events) == answer
    # The client that followed it live, reconnecting when it had to, saw the same chunks: no
    # gap, no repeat.
    live = await follower.finish()
    infra.note(f"the live client reconnected {follower.reconnects} times")
    assert [(e.id, e.data) for e in live] == [(e.id, e.data) for e in events]

    # Temporal agrees: the turn's workflow completed, not merely its row in Postgres.
    client = await connect(infra.settings)
    handle = client.get_workflow_handle(turn_workflow_id("helper", cid, turn["turn_id"]))
    async with asyncio.timeout(30):
        await handle.result()
    infra.note("turn workflow completed in Temporal")
    attempts = activity_attempts((await handle.fetch_history()).events)
    infra.note(f"attempts of the turn's activities: {attempts}")
    await until_ready(api)
    infra.note("/readyz 200")
    return events, attempts


async def assert_conversation_goes_on(infra: Infra, api: httpx.AsyncClient, cid: str) -> None:
    """The turn's end started the conversation's next turn: the next one runs."""
    infra.fake.reset()  # drop the repeating script of the turn before (the fake is ours alone)
    infra.fake.script(cid, reply(text("after the restart")))
    base = f"/v1/agents/helper/conversations/{cid}"
    turn = (await api.post(f"{base}/turns", json={"input": "again"})).json()
    final = await until_terminal(api, turn["status_url"], within=20)
    assert final["status"] == "completed", final
    assert final["message"]["parts"][-1]["text"] == "after the restart"
    infra.note("the next turn completed")


# --------------------------------------------------------------------------- tests


async def test_postgres_restart_mid_stream(
    infra: Infra, gateway: httpx.AsyncClient, cid: str
) -> None:
    """The step's writes fail while Postgres is down; the step is retried (with `reset-step`)
    until Postgres is back, by the same worker, over the same pool."""
    with infra.logs_on_failure():
        turn = await submit(infra, gateway, cid, WORDS)
        follower = Follower(gateway, turn["stream_url"]).start(infra)
        await follower.until_streaming()
        async with infra.postgres_down():
            status, body = await readiness(gateway)
            assert status == 503 and body["checks"]["postgres"] != "ok", body
            codes = await answers_for(gateway, turn["status_url"], DOWN_FOR)
            infra.note(f"GET turn while Postgres is down answered {codes}")

        events, attempts = await assert_completed_once(
            infra, gateway, cid, turn, "".join(WORDS), follower
        )
        # The outage did cut the step: it was asked again, and clients were told to drop the
        # abandoned attempt's text.
        assert infra.fake.calls(cid) >= 2
        assert "reset-step" in [c["type"] for c in chunks(events)]
        assert attempts[0] >= 2, attempts  # retried: it rode the outage out
        await assert_conversation_goes_on(infra, gateway, cid)


async def test_temporal_restart_after_the_step_ended_while_it_was_down(
    infra: Infra, gateway: httpx.AsyncClient, cid: str
) -> None:
    """The step finishes and records the turn while Temporal is away; its completion reaches
    Temporal once it is back, and the workflows carry on from their persisted state."""
    with infra.logs_on_failure():
        turn = await submit(infra, gateway, cid, WORDS)
        follower = Follower(gateway, turn["stream_url"]).start(infra)
        await follower.until_streaming()
        async with infra.temporal_down():
            status, body = await readiness(gateway)
            assert status == 503 and body["checks"]["temporal"] != "ok", body
            ended = await until_terminal(gateway, turn["status_url"], within=10)
            assert ended["status"] == "completed", ended
            infra.note("turn recorded while Temporal is down")

        await assert_completed_once(infra, gateway, cid, turn, "".join(WORDS), follower)
        assert infra.fake.calls(cid) == 1  # the step was never run twice
        await assert_conversation_goes_on(infra, gateway, cid)


async def test_temporal_restart_while_the_step_streams(
    infra: Infra, gateway: httpx.AsyncClient, cid: str
) -> None:
    """Temporal is away longer than the step's heartbeat timeout and back while the step still
    streams. Whether Temporal retries the step or lets it finish, the client ends up with one
    copy of the answer and one stored message, and nothing is recorded as aborted."""
    with infra.logs_on_failure():
        turn = await submit(infra, gateway, cid, LONG_WORDS)
        follower = Follower(gateway, turn["stream_url"]).start(infra)
        await follower.until_streaming()
        async with infra.temporal_down():
            await asyncio.sleep(HEARTBEAT_TIMEOUT + 1)
            current = await get_turn(gateway, turn["status_url"])
            assert current["status"] == "running", current  # Temporal is back mid-step
        await assert_completed_once(infra, gateway, cid, turn, "".join(LONG_WORDS), follower)
        await assert_conversation_goes_on(infra, gateway, cid)


async def test_streams_dropped_by_an_outage_are_one_log_line_each(
    infra: Infra, gateway: httpx.AsyncClient, cid: str
) -> None:
    """Open streams cannot be served while Postgres is down: each ends, cleanly (its HTTP
    response is complete, without `[DONE]`: the turn has not ended), and the gateway logs one
    warning line for it, naming the turn and the cause, not "Exception in ASGI application"
    with a traceback per stream. A client resumes with `Last-Event-ID` and gets the rest."""
    streams = 3
    api_log = next(p.log for p in infra.stack.processes if p.name == "api")
    with infra.logs_on_failure():
        turn = await submit(infra, gateway, cid, LONG_WORDS)
        followers = [_OneConnection(gateway, turn["stream_url"]) for _ in range(streams)]
        tasks = [asyncio.create_task(f.read()) for f in followers]
        infra.tasks.extend(tasks)
        async with asyncio.timeout(20):
            while not all(f.deltas >= 3 for f in followers):
                assert not any(t.done() for t in tasks), [t.result() for t in tasks if t.done()]
                await asyncio.sleep(0.05)
        mark = api_log.stat().st_size
        async with infra.postgres_down():
            async with asyncio.timeout(30):
                ended = await asyncio.gather(*tasks)  # raises if a stream broke uncleanly
            infra.note(f"streams ended: {ended}")
            await asyncio.sleep(0.5)  # the gateway's log lines are written as the streams end
        logged = api_log.read_bytes()[mark:].decode(errors="replace")
        # (The LISTEN connection's own reconnects are logged with their traceback, once per
        # attempt, by think.streaming: not per stream, and not the ASGI server's.)
        assert "Exception in ASGI application" not in logged, logged
        assert "sse_starlette" not in logged and "api/_sse.py" not in logged, logged
        dropped = [line for line in logged.splitlines() if "stream of turn" in line]
        assert len(dropped) == streams, logged
        for line in dropped:
            assert "WARNING" in line and turn["turn_id"] in line and "dropped" in line, line
        assert all(not f.done for f in followers)

        # Each comes back where it left off and reads the turn to its end.
        final = await until_terminal(gateway, turn["status_url"])
        assert final["status"] == "completed", final
        for follower in followers:
            _, rest = await read_stream(gateway, turn["stream_url"], last_event_id=follower.last)
            assert rest[0].id == follower.last + 1 and rest[-1].data == "[DONE]"


@dataclass
class _OneConnection:
    """One stream connection, read to its end, never reconnected."""

    api: httpx.AsyncClient
    url: str
    deltas: int = 0
    last: int = -1
    done: bool = False

    async def read(self) -> int:
        """The number of events read; an httpx error if the response broke off."""
        events = 0
        buffer = ""
        async with self.api.stream("GET", self.url, timeout=60) as response:
            assert response.status_code == 200
            async for piece in response.aiter_text():
                complete, separator, buffer = (buffer + piece).rpartition("\n\n")
                for event in parse(complete + separator) if separator else []:
                    events += 1
                    self.done = self.done or event.data == "[DONE]"
                    if event.id is not None:
                        self.last = event.id
                        self.deltas += event.chunk["type"] == "text-delta"
        return events
