"""The production shape: two gateways, three workers, a steady load of streamed turns, and the
faults a deployment meets (a rolling restart, a crash, a gateway lost with streams open,
Postgres and Temporal restarted).

Shared by tests/durability/test_production_shape.py (which asserts the outcome) and the
`bench.production` and `bench.soak` runs (which measure it). Everything is real: embedded
Postgres, a Temporal dev server on a fixed port (so it can come back on it, on the same
SQLite file), gateways and workers run through the CLI as a deployment runs them; only the
model is a scripted fake (`think.testing`), streaming a few words slowly, so that streams are
open when the faults land.

The clients behave as careful production clients: every submission carries an
`Idempotency-Key` and is sent again (to whichever gateway answers) until one answers it; every
stream is followed live from its start and, when its connection breaks or ends early, resumed
with `Last-Event-ID` on whichever gateway answers, as the AI SDK's resuming client does.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import signal
import statistics
import subprocess
import time
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx

from tests._sse import Event, chunks, parse
from tests._stack import Process, Stack, free_port, stack_env
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

AGENT = "helper"
TERMINAL = ("completed", "error", "aborted", "skipped", "interrupted")
STOP_GRACE = 40.0
"""How long a SIGTERMed worker may take: its graceful shutdown lets running activities finish
(10 s, `graceful_shutdown_timeout` in think/engine/_worker.py), then it closes its pools."""


def answer_words(cid: str, words: int) -> list[str]:
    """The scripted answer of conversation `cid`: its own words, so that an answer stored in
    the wrong place, or twice, cannot pass for another."""
    return [f"{cid}.{i} " for i in range(words)]


# --------------------------------------------------------------------------- the deployment


@dataclass
class Deployment:
    """Services, gateways and workers of one run; a restart swaps in the new server's handle."""

    home: Path
    temporal_port: int
    postgres: EmbeddedPostgres
    temporal: TemporalDevServer
    model: FakeOpenAIServer
    stack: Stack
    gateways: list[str] = field(default_factory=list)
    """The live gateways' URLs: the pool a load balancer sends requests to."""
    gateway_processes: dict[str, Process] = field(default_factory=dict)
    timeline: list[str] = field(default_factory=list)
    phases: list[tuple[str, float, float]] = field(default_factory=list)
    """(name, start, end) on `time.monotonic()`, for latencies by phase."""

    @property
    def settings(self) -> Settings:
        return Settings(
            agents=["tests.agents:Helper"],
            task_queue=self.stack.env["THINK_TASK_QUEUE"],
            database_url=self.postgres.url,
            temporal_address=self.temporal.address,
            home=self.home,
        )

    def note(self, what: str) -> None:
        self.timeline.append(f"{datetime.now():%H:%M:%S.%f} {what}")

    @contextlib.asynccontextmanager
    async def phase(self, name: str) -> AsyncIterator[None]:
        start = time.monotonic()
        self.note(f"{name}: begins")
        try:
            yield
        finally:
            self.phases.append((name, start, time.monotonic()))
            self.note(f"{name}: ends")

    def live(self, role: str) -> list[Process]:
        return [p for p in self.stack.processes if p.name == role and p.popen.poll() is None]

    @property
    def pids(self) -> dict[str, list[int]]:
        """Live process ids by role (`api`, `worker`, `postgres`, `temporal`), for sampling."""
        pids = {role: [p.pid for p in self.live(role)] for role in ("api", "worker")}
        pids["postgres"] = [self.postgres.pid]
        pids["temporal"] = [self.temporal.pid]
        return pids

    # --- processes (blocking: called through `asyncio.to_thread` from the load's loop)

    def start_worker(self) -> Process:
        worker = self.stack.start_worker()
        self.stack.wait_polling(worker)
        self.note(f"worker {worker.pid} polling")
        return worker

    def start_gateway(self) -> tuple[Process, str]:
        gateway = self.stack.start_api()
        url = self.stack.api_url
        self.gateways.append(url)
        self.gateway_processes[url] = gateway
        self.note(f"gateway {gateway.pid} ready at {url}")
        return gateway, url

    # --- faults

    async def rolling_restart(self) -> list[float]:
        """Every worker replaced in turn, as a rolling deploy does: the replacement is polling
        before the old one gets SIGTERM (the graceful path), which must end on its own.
        Answers how long each old worker took to exit."""
        exits: list[float] = []
        for old in self.live("worker"):
            await asyncio.to_thread(self.start_worker)
            self.note(f"SIGTERM worker {old.pid}")
            start = time.monotonic()
            old.popen.send_signal(signal.SIGTERM)
            try:
                code = await asyncio.to_thread(old.popen.wait, STOP_GRACE)
            except subprocess.TimeoutExpired:
                old.kill()
                raise AssertionError(
                    f"worker {old.pid} ignored SIGTERM for {STOP_GRACE} s"
                ) from None
            exits.append(time.monotonic() - start)
            self.note(f"worker {old.pid} exited {code} after {exits[-1]:.1f} s")
            if code != 0:
                raise AssertionError(f"worker {old.pid} exited {code}:\n{old.log_tail()}")
        return exits

    async def kill_worker(self) -> None:
        """One worker SIGKILLed, as a crash would, and a replacement started."""
        victim = self.live("worker")[0]
        victim.kill()
        self.note(f"SIGKILL worker {victim.pid}")
        await asyncio.to_thread(self.start_worker)

    async def kill_gateway(self, load: Load, streams: int = 2) -> int:
        """The first gateway SIGKILLed once at least `streams` clients read a stream from it;
        it leaves the pool, and a new gateway joins. Answers how many streams it had open."""
        url = self.gateways[0]
        victim = self.gateway_processes.pop(url)
        for _ in range(3000):  # a minute
            if load.open_on(url) >= streams:
                break
            await asyncio.sleep(0.02)
        else:
            raise AssertionError(f"never {streams} streams open on {url}")
        cut = load.open_on(url)
        self.gateways.remove(url)
        victim.kill()
        self.note(f"SIGKILL gateway {victim.pid} with {cut} streams open")
        await asyncio.to_thread(self.start_gateway)
        return cut

    async def restart_postgres(self, down: float) -> None:
        """Postgres stopped (fast shutdown), away for `down` seconds, started again on the
        same data directory, so on the same socket."""
        url = self.postgres.url
        self.note("stopping Postgres")
        await asyncio.to_thread(self.postgres.stop)
        await asyncio.sleep(down)
        self.postgres = await asyncio.to_thread(start_postgres, self.home / "pg")
        self.note("Postgres is back")
        assert self.postgres.url == url

    async def restart_temporal(self, down: float) -> None:
        """The Temporal dev server stopped, away for `down` seconds, started again on the same
        port and the same database file."""
        address = self.temporal.address
        self.note("stopping Temporal")
        await asyncio.to_thread(self.temporal.stop)
        await asyncio.sleep(down)
        self.temporal = await asyncio.to_thread(
            start_temporal, self.home / "temporal.db", port=self.temporal_port, ui_port=None
        )
        self.note("Temporal is back")
        assert self.temporal.address == address

    def log_tails(self, n: int = 30) -> str:
        parts = ["--- timeline ---", *self.timeline]
        parts += [
            f"--- {p.name} {p.pid} ({p.log}) ---\n{p.log_tail(n)}" for p in self.stack.processes
        ]
        parts.append(f"--- temporal ({self.temporal.log_file}) ---\n{self.temporal.log_tail()}")
        return "\n".join(parts)


@contextlib.contextmanager
def deployment(
    home: Path,
    *,
    gateways: int = 2,
    workers: int = 3,
    keep: int | None = None,
    env: dict[str, str] | None = None,
) -> Iterator[Deployment]:
    """Services, `workers` workers and `gateways` gateways on one task queue; all stopped
    (and checked gone) at the end. `keep`: the fake model's `keep` (0 for long runs)."""
    temporal_port = free_port()  # fixed from here on, so Temporal can come back on it
    pg, temporal = start_embedded(home, temporal_port=temporal_port, ui_port=None)
    assert pg is not None and temporal is not None
    model = FakeOpenAIServer(keep=keep)
    logs = home / "logs"
    logs.mkdir(exist_ok=True)
    full_env = stack_env(
        database_url=pg.url,
        temporal_address=temporal.address,
        task_queue="think-production",
        agents="tests.agents:Helper",
        model_url=None,
        home=logs,
    )
    run = Deployment(home, temporal_port, pg, temporal, model, Stack(env=full_env, logs=logs))
    try:
        model.start()
        full_env.update(OPENAI_BASE_URL=model.base_url, OPENAI_API_KEY="test-key")
        full_env["THINK_TEST_EVENTS_LOG"] = "0"  # tests/agents.py's event recorder: off
        full_env.update(env or {})
        migrate_now(run.settings)
        started = [run.stack.start_worker() for _ in range(workers)]
        for _ in range(gateways):
            run.start_gateway()
        for worker in started:
            run.stack.wait_polling(worker)
        yield run
    finally:
        for proc in reversed(run.stack.processes):
            proc.stop()
        model.stop()
        run.temporal.terminate()  # overlap Temporal's shutdown with Postgres's
        try:
            run.postgres.stop()
        finally:
            run.temporal.stop()


# --------------------------------------------------------------------------- the load


@dataclass
class TurnRun:
    """One submission, as its client saw it."""

    cid: str
    key: str
    answer: str
    submitted: float
    ended: float | None = None
    turn_ids: set[str] = field(default_factory=set)
    """Every `turn_id` the submissions with this key were answered with: one, or a bug."""
    turn: dict[str, Any] = field(default_factory=dict)
    posts: int = 0
    events: list[Event] = field(default_factory=list)
    connections: int = 0
    failure: str | None = None
    status: str = "unknown"
    """The turn's status as stored, once checked."""

    @property
    def latency(self) -> float | None:
        return None if self.ended is None else self.ended - self.submitted


class ClientGaveUp(Exception):
    """A client could not get an answer from any gateway within its deadline."""


@dataclass
class Load:
    """`clients` clients, each submitting a turn in a conversation of its own, following its
    stream to the end, then the next, until `stop` is set (each finishes the turn it is in)."""

    deployment: Deployment
    clients: int
    words: int = 12
    delay: float = 0.1
    deadline: float = 120.0
    """How long one turn may take, submission to `[DONE]`, before its client gives up."""
    run_id: str = field(default_factory=lambda: f"p{time.time_ns() % 10**9:x}")
    runs: list[TurnRun] = field(default_factory=list)
    streaming: dict[int, str] = field(default_factory=dict)
    """Client number -> the gateway it reads a stream from right now."""
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)
    _http: httpx.AsyncClient | None = None

    def open_on(self, url: str) -> int:
        return sum(1 for gateway in self.streaming.values() if gateway == url)

    async def __aenter__(self) -> Load:
        limits = httpx.Limits(max_connections=self.clients * 2 + 20)
        timeout = httpx.Timeout(30.0, connect=5.0)
        self._http = httpx.AsyncClient(timeout=timeout, limits=limits)
        self._tasks = [asyncio.create_task(self._client(n)) for n in range(self.clients)]
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self.stop.set()
        if exc_info[0] is not None:
            for task in self._tasks:
                task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=exc_info[0] is not None)
        assert self._http is not None
        await self._http.aclose()

    async def drain(self) -> None:
        """Stop submitting; wait for the turns in flight to end (or their clients to give up)."""
        self.stop.set()
        await asyncio.gather(*self._tasks)

    def _gateway(self, client: int, attempt: int) -> str:
        pool = self.deployment.gateways
        return pool[(client + attempt) % len(pool)]

    async def _client(self, client: int) -> None:
        for n in itertools.count():
            if self.stop.is_set():
                return
            cid = f"{self.run_id}-{client}-{n}"
            answer = "".join(answer_words(cid, self.words))
            # Repeating: a step cut by a fault asks the model again, which continues a partial
            # answer kept after a crash where it ends, as a model does.
            scripted = reply(text(*answer_words(cid, self.words)), delay=self.delay, continues=True)
            self.deployment.model.script(cid, scripted, repeat=True)
            run = TurnRun(cid, f"{cid}-key", answer, time.monotonic())
            self.runs.append(run)
            try:
                async with asyncio.timeout(self.deadline):
                    await self._submit(client, run)
                    await self._follow(client, run)
                run.ended = time.monotonic()
            except (TimeoutError, ClientGaveUp) as exc:
                run.failure = f"{type(exc).__name__}: {exc} after {run.posts} submissions"
            finally:
                self.streaming.pop(client, None)

    async def _submit(self, client: int, run: TurnRun) -> None:
        """POST the turn with its key until a gateway answers 200 or 202 (a dead gateway, a
        503 while Postgres or Temporal is away: the same request again, elsewhere)."""
        assert self._http is not None
        path = f"/v1/agents/{AGENT}/conversations/{run.cid}/turns"
        for attempt in itertools.count():
            run.posts += 1
            try:
                response = await self._http.post(
                    f"{self._gateway(client, attempt)}{path}",
                    json={"input": f"tell me ({run.cid})"},
                    headers={"Idempotency-Key": run.key},
                )
            except httpx.HTTPError:
                await asyncio.sleep(0.2)
                continue
            if response.status_code in (200, 202):
                run.turn = response.json()
                run.turn_ids.add(run.turn["turn_id"])
                return
            if response.status_code not in (429, 502, 503, 504):
                raise ClientGaveUp(f"{response.status_code} {response.text[:300]}")
            await asyncio.sleep(0.2)

    async def _follow(self, client: int, run: TurnRun) -> None:
        """Read the turn's stream from its start to `[DONE]`, resuming after the last event
        read (`Last-Event-ID`) whenever a connection breaks or ends early."""
        assert self._http is not None
        path = run.turn["stream_url"]
        path = path[path.index("/v1/") :]
        for attempt in itertools.count():
            if run.events and run.events[-1].data == "[DONE]":
                return
            gateway = self._gateway(client, attempt)
            seen = [e.id for e in run.events if e.id is not None]
            headers = {"Last-Event-ID": str(seen[-1])} if seen else {}
            run.connections += 1
            try:
                async with self._http.stream(
                    "GET", f"{gateway}{path}", headers=headers, timeout=httpx.Timeout(60.0)
                ) as response:
                    if response.status_code == 200:
                        self.streaming[client] = gateway
                        buffer = ""
                        async for piece in response.aiter_text():
                            complete, separator, buffer = (buffer + piece).rpartition("\n\n")
                            if separator:
                                run.events += parse(complete + separator)
            except httpx.HTTPError:
                pass
            finally:
                self.streaming.pop(client, None)
            if not (run.events and run.events[-1].data == "[DONE]"):
                await asyncio.sleep(0.2)


# --------------------------------------------------------------------------- the outcome


def assembled(events: list[Event]) -> str:
    """The answer's text as an AI SDK client rebuilds it from the chunks: `reset-step` drops
    what follows the message's last `start-step` (docs/ai-sdk-ui-message.md)."""
    parts: list[list[str] | None] = []  # None: a step-start; a list: a text part's deltas
    by_id: dict[str, list[str]] = {}
    for chunk in chunks(events):
        kind = chunk["type"]
        if kind == "start-step":
            parts.append(None)
        elif kind == "text-start":
            by_id[chunk["id"]] = []
            parts.append(by_id[chunk["id"]])
        elif kind == "text-delta":
            by_id[chunk["id"]].append(chunk["delta"])
        elif kind == "reset-step":
            last = max((i for i, p in enumerate(parts) if p is None), default=-1)
            del parts[last + 1 :]
            by_id.clear()
    return "".join("".join(p) for p in parts if p is not None)


def stored_text(message: dict[str, Any]) -> str:
    return "".join(p["text"] for p in message["parts"] if p["type"] == "text")


def retries(events: list[Event]) -> int:
    """How many times the stream says a step was asked again: a retried attempt
    (`reset-step`) or a crash's continuation (`data-recovering`)."""
    return sum(1 for c in chunks(events) if c["type"] in ("reset-step", "data-recovering"))


def recovered(events: list[Event]) -> bool:
    """Whether the stream says a step was asked again: a retried attempt (`reset-step`) or a
    crash's continuation (`data-recovering`)."""
    return any(c["type"] in ("reset-step", "data-recovering") for c in chunks(events))


@dataclass
class Outcome:
    """What happened to every submission; `problems` is empty when nothing went wrong."""

    turns: int = 0
    statuses: Counter[str] = field(default_factory=Counter)
    recovered: int = 0
    """Turns whose stream shows a step asked again (each asked the model once more)."""
    model_calls: int = 0
    unseen_calls: int = 0
    """Model requests beyond those the streams show: dropped early first steps."""
    resubmissions: int = 0
    """Submissions sent again with the same key (a gateway died, or answered 503)."""
    reconnects: int = 0
    """Stream connections beyond each turn's first (resumed with `Last-Event-ID`)."""
    problems: list[str] = field(default_factory=list)

    def summary(self) -> str:
        return (
            f"turns {self.turns}, statuses {dict(self.statuses)}, recovered {self.recovered}, "
            f"model calls {self.model_calls} ({self.unseen_calls} unseen), "
            f"resubmissions {self.resubmissions}, stream reconnects {self.reconnects}, "
            f"problems {len(self.problems)}"
        )


async def check(
    deployment: Deployment, runs: list[TurnRun], *, model_calls: bool = True
) -> Outcome:
    """Every submission against what the deployment stored and streamed: one turn per key,
    terminal and completed; one stored answer, the scripted words, once (a partial kept after a
    crash and its continuation together); a live stream whose events are exactly the stored
    log's (ids contiguous, nothing missing or repeated), which rebuilds the stored answer; the
    model asked once per turn, or once more per recovery the stream shows. `model_calls=False`
    when the fake keeps no requests (a soak)."""
    outcome = Outcome(turns=len(runs))
    gateway = deployment.gateways[0]
    semaphore = asyncio.Semaphore(16)
    async with httpx.AsyncClient(base_url=gateway, timeout=30) as api:

        async def one(run: TurnRun) -> None:
            async with semaphore:
                problems = await _check_one(api, deployment, run, model_calls)
            outcome.problems += [f"{run.cid}: {p}" for p in problems]

        await asyncio.gather(*(one(run) for run in runs))
    for run in runs:
        outcome.statuses[run.status] += 1
        outcome.recovered += recovered(run.events)
        outcome.resubmissions += run.posts - 1
        outcome.reconnects += max(run.connections - 1, 0)
        if model_calls:
            calls = deployment.model.calls(run.cid)
            outcome.model_calls += calls
            outcome.unseen_calls += max(calls - 1 - retries(run.events), 0)
    return outcome


async def _check_one(
    api: httpx.AsyncClient, deployment: Deployment, run: TurnRun, model_calls: bool
) -> list[str]:
    if run.failure is not None:
        return [f"the client gave up: {run.failure}"]
    problems: list[str] = []
    if len(run.turn_ids) != 1:
        problems.append(f"one key answered with several turns: {run.turn_ids}")
    base = f"/v1/agents/{AGENT}/conversations/{run.cid}"
    turns = (await api.get(f"{base}/turns")).json()["turns"]
    if [t["turn_id"] for t in turns] != list(run.turn_ids):
        problems.append(f"turns stored {[t['turn_id'] for t in turns]}, client saw {run.turn_ids}")
    again = await api.post(
        f"{base}/turns",
        json={"input": f"tell me ({run.cid})"},
        headers={"Idempotency-Key": run.key},
    )
    if again.status_code != 200 or again.json()["turn_id"] not in run.turn_ids:
        problems.append(f"the key again: {again.status_code} {again.text[:200]}")
    if not turns:
        return problems
    final = turns[0]
    run.status = final["status"]
    if final["status"] != "completed":
        problems.append(f"ended {final['status']}: {final.get('error')}")
    messages = (await api.get(f"{base}/messages")).json()["messages"]
    answers = [m for m in messages if m["role"] == "assistant"]
    if [m["id"] for m in answers] != [final["message_id"]]:
        problems.append(
            f"stored answers {[m['id'] for m in answers]}, turn's {final['message_id']}"
        )
    stored = stored_text(answers[0]) if answers else ""
    if stored != run.answer:
        problems.append(f"stored text is not the answer once: {stored!r}")

    async with api.stream("GET", final["stream_url"][final["stream_url"].index("/v1/") :]) as r:
        log = parse((await r.aread()).decode())
    ids = [e.id for e in run.events if e.id is not None]
    if ids != list(range(ids[0] if ids else 0, (ids[0] if ids else 0) + len(ids))):
        problems.append(f"stream ids not contiguous: {ids}")
    if [(e.id, e.data) for e in run.events] != [(e.id, e.data) for e in log]:
        problems.append(f"live stream differs from the log: {len(run.events)} vs {len(log)}")
    kinds = [c["type"] for c in chunks(run.events)]
    if run.events[-1].data != "[DONE]" or kinds.count("finish") != 1 or "abort" in kinds:
        problems.append(f"stream did not end once, cleanly: {kinds[-5:]}")
    if assembled(run.events) != stored:
        problems.append(f"client rebuilt {assembled(run.events)!r}, stored {stored!r}")
    if model_calls:
        # Once, once more per retry the stream shows, and at most once more unseen: a first
        # step begun beside an eager start that did not run here (a worker stopping, Temporal
        # away) is dropped, its request cut off before a word of it is written
        # (docs/architecture.md, "the eager start"). Its words must show nowhere: the stream
        # equals the log and rebuilds the stored answer, checked above.
        calls = deployment.model.calls(run.cid)
        if not 1 <= calls <= 2 + retries(run.events):
            problems.append(f"model asked {calls} times, the stream shows {retries(run.events)}")
    return problems


def p95(values: list[float]) -> float:
    if not values:
        return float("nan")
    if len(values) < 2:
        return values[0]
    return statistics.quantiles(values, n=20, method="inclusive")[-1]


def latencies(runs: list[TurnRun], start: float, end: float) -> list[float]:
    """Latencies of the turns in flight at some time within [start, end): submitted before
    its end, ended after its start."""
    return [
        r.latency
        for r in runs
        if r.latency is not None and r.ended is not None and r.submitted < end and r.ended > start
    ]


async def run_faults(deployment: Deployment, load: Load, *, settle: float = 3.0) -> dict[str, Any]:
    """The faults in sequence, `settle` seconds of steady load after each; answers what each
    measured (the rolling restart's exit times, the streams the lost gateway had open)."""
    found: dict[str, Any] = {}
    async with deployment.phase("rolling restart"):
        found["sigterm_exit_seconds"] = await deployment.rolling_restart()
    await asyncio.sleep(settle)
    async with deployment.phase("worker SIGKILL"):
        await deployment.kill_worker()
    await asyncio.sleep(settle)
    async with deployment.phase("gateway kill"):
        found["streams_cut"] = await deployment.kill_gateway(load)
    await asyncio.sleep(settle)
    async with deployment.phase("Postgres restart"):
        await deployment.restart_postgres(down=3.0)
    await asyncio.sleep(settle)
    async with deployment.phase("Temporal restart"):
        await deployment.restart_temporal(down=3.0)
    await asyncio.sleep(settle)
    return found
