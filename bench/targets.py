"""The project's speed targets, measured in one run against the raw Temporal floor.

    python -m bench.targets                 # a few minutes
    python -m bench.targets --long 1000     # the long conversation at 1,000 turns

1. Starts a local deployment (`bench._stack.local_stack`: embedded Postgres, the tuned Temporal
   dev server, one worker, one API, the scripted instant model) and warms it up.
2. In each of `--rounds` rounds (3), one after the other:
   - runs `../shared/bench/turn_shapes.py` (`--shapes-script`): what each turn *shape* costs
     on a bare Temporal dev server of its own, with trivial activities and no HTTP, Postgres
     or model. Its last output line is JSON: `direct` (one workflow per tool turn, three
     activities), `plain` (one workflow, one activity), and in the first round also `local`,
     `alllocal`, `entity`;
   - then, through HTTP only, against our deployment (idle while the shapes run):
     (a) tool turns (model -> tool `add` -> model), sequential, wait mode: submit -> completion;
     (b) plain turns, sequential, stream mode: submit -> first `text-delta` SSE event;
     (c) tool turns at `--concurrency` 20 (one conversation each) for `--seconds`: turns/s,
     and the CPU seconds per turn of the worker, the API, the Temporal server and Postgres
     (every process of each tree, from /proc/<pid>/stat: utime+stime of the live processes
     plus cutime+cstime, which holds their reaped children, such as Postgres backends that
     exited).
   A ratio of (a)-(c) is the median of the rounds' ratios, each round's figure against the raw
   shape's run just before it: on a shared machine, load comes and goes over minutes, and one
   pairing in one stretch of it let a burst on either side decide the whole run. The figures
   shown beside it are the medians of each side's rounds.
3. One conversation of `--long` tool turns and one of `--long` plain turns: the Temporal
   history events of turn 1 and of turn N, and the latency p50 of the last `--window` turns
   against that of turns ~1, in fresh conversations, each run right after one of them (and,
   for reference, that of the conversation's own first `--window` turns).
4. Prints a table (measure, ours, the raw shape's figure, the ratio, the target, PASS/FAIL)
   and one JSON line with everything.

History events are counted without knowing the engine's workflows: every workflow whose
search attribute ThinkConversationId is the conversation's id, plus any workflow started
since the conversation's first turn (a workflow a turn starts without the attribute; the
deployment runs nothing else meanwhile), is listed before and after a turn once Temporal is
quiet; the turn's events are what their histories gained. A per-conversation workflow counts
the events it gained across the turn, a workflow per turn all of its own.

Only 127.0.0.1 is used. Every process started here is stopped at the end, also on Ctrl-C or
SIGTERM; every HTTP call has a timeout and the shapes script one of `--shapes-timeout`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import signal
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
from temporalio.client import Client, WorkflowExecutionStatus

from bench._stack import local_stack
from think.testing import FakeOpenAIServer, text, tool_call

ROOT = Path(__file__).resolve().parent.parent
AGENT = "helper"
SHAPES = ("direct", "plain", "local", "alllocal", "entity")
CPU_ROLES = ("worker", "api", "temporal", "postgres")
_TICK = os.sysconf("SC_CLK_TCK")


# --------------------------------------------------------------------------- helpers


def p50(values: list[float]) -> float:
    return statistics.median(values)


def p95(values: list[float]) -> float:
    """The same rank as turn_shapes.py takes, so the two are compared like for like."""
    ordered = sorted(values)
    return ordered[int(0.95 * (len(ordered) - 1))]


def turn_url(cid: str) -> str:
    return f"/v1/agents/{AGENT}/conversations/{cid}/turns"


async def tool_turn(api: httpx.AsyncClient, model: FakeOpenAIServer, cid: str) -> float:
    """One tool turn in wait mode; seconds from submit to the completed answer."""
    model.script(cid, tool_call("add", {"a": 1, "b": 2}), text("3"))
    t0 = time.perf_counter()
    r = await api.post(turn_url(cid), json={"input": "1+2?", "mode": "wait"})
    elapsed = time.perf_counter() - t0
    if r.status_code >= 300 or r.json().get("status") != "completed":
        raise RuntimeError(f"tool turn in {cid} did not complete: {r.status_code} {r.text}")
    return elapsed


async def plain_turn_wait(api: httpx.AsyncClient, model: FakeOpenAIServer, cid: str) -> float:
    model.script(cid, text("Hello there."))
    t0 = time.perf_counter()
    r = await api.post(turn_url(cid), json={"input": "Hi", "mode": "wait"})
    elapsed = time.perf_counter() - t0
    if r.status_code >= 300 or r.json().get("status") != "completed":
        raise RuntimeError(f"plain turn in {cid} did not complete: {r.status_code} {r.text}")
    return elapsed


async def plain_turn_stream(api: httpx.AsyncClient, model: FakeOpenAIServer, cid: str) -> float:
    """One plain turn in stream mode; seconds from submit to the first `text-delta` event."""
    model.script(cid, text("Hello", " there."))
    t0 = time.perf_counter()
    first: float | None = None
    lines: list[str] = []
    async with api.stream("POST", turn_url(cid), json={"input": "Hi", "mode": "stream"}) as r:
        async for line in r.aiter_lines():  # read to the end: the turn must be over
            lines.append(line)
            if first is None and line.startswith("data:") and '"text-delta"' in line:
                first = time.perf_counter() - t0
    if first is None:
        raise RuntimeError(f"no text-delta in {cid}:\n" + "\n".join(lines[-20:]))
    return first


async def busy_client(
    api: httpx.AsyncClient, model: FakeOpenAIServer, cid: str, deadline: float, done: list[float]
) -> None:
    """Tool turns in `cid`, one after the other, until `deadline`; each one's latency."""
    while time.perf_counter() < deadline:
        done.append(await tool_turn(api, model, cid))


# --------------------------------------------------------------------------- raw shapes


def run_shapes(
    script: Path, n: int, timeout: float, shapes: tuple[str, ...] = SHAPES
) -> dict[str, dict[str, float]]:
    """Run turn_shapes.py with this venv's `temporal` first on PATH; its last JSON line."""
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    command = [sys.executable, str(script), "--n", str(n), "--shapes", ",".join(shapes)]
    # Its own session, so that on a timeout or Ctrl-C its dev server goes with it.
    proc = subprocess.Popen(
        command,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        out, _ = proc.communicate(timeout=timeout)
    except BaseException:
        with_group_killed(proc)
        raise
    for line in out.splitlines():
        if line and not line.startswith("{"):
            print(f"  shapes| {line}", flush=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{script} exited with {proc.returncode}:\n{out[-3000:]}")
    for line in reversed(out.splitlines()):
        if line.startswith("{"):
            result: dict[str, dict[str, float]] = json.loads(line)
            missing = [s for s in shapes if s not in result]
            if missing:
                raise RuntimeError(f"{script} gave no figures for {missing}")
            return result
    raise RuntimeError(f"{script} printed no JSON line:\n{out[-3000:]}")


def with_group_killed(proc: subprocess.Popen[str]) -> None:
    """SIGTERM the process group we started (it stops its dev server), then SIGKILL it."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(10)
            # The script's dev server may outlive it for a moment: the group's last members.
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            return
        except subprocess.TimeoutExpired:
            continue
        return


# --------------------------------------------------------------------------- CPU from /proc


def _stats() -> dict[int, tuple[int, int]]:
    """pid -> (ppid, utime+stime+cutime+cstime in ticks) of every live process."""
    out: dict[int, tuple[int, int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            raw = Path(entry.path, "stat").read_text()
        except OSError:
            continue  # gone meanwhile
        fields = raw.rpartition(")")[2].split()
        # fields[0] is field 3 (state): ppid is 4, utime..cstime are 14..17.
        out[int(entry.name)] = (int(fields[1]), sum(int(v) for v in fields[11:15]))
    return out


def tree_cpu(roots: dict[str, list[int]]) -> dict[str, float]:
    """CPU seconds so far of each role's process trees (the roots and all descendants)."""
    stats = _stats()
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in stats.items():
        children.setdefault(ppid, []).append(pid)
    out: dict[str, float] = {}
    for role, pids in roots.items():
        ticks, todo, seen = 0, list(pids), set()
        while todo:
            pid = todo.pop()
            if pid in seen or pid not in stats:
                continue
            seen.add(pid)
            ticks += stats[pid][1]
            todo.extend(children.get(pid, []))
        out[role] = ticks / _TICK
    return out


def own_cpu() -> float:
    """This process (the HTTP clients and the scripted model's thread)."""
    t = os.times()
    return t.user + t.system


# --------------------------------------------------------------------------- history events


@dataclass
class EventCounter:
    """History events per workflow run, for one conversation, engine-agnostic (see the top)."""

    temporal: Client
    cid: str
    since: str = field(default_factory=lambda: datetime.now(UTC).isoformat())
    closed: dict[tuple[str, str], int] = field(default_factory=dict)
    untagged: set[str] = field(default_factory=set)

    async def snapshot(self) -> dict[tuple[str, str], int]:
        query = f"ThinkConversationId='{self.cid}' OR StartTime >= '{self.since}'"
        counts: dict[tuple[str, str], int] = {}
        async for wf in self.temporal.list_workflows(query):
            key = (wf.id, wf.run_id)
            if key in self.closed:
                counts[key] = self.closed[key]
                continue
            tagged = [
                pair.value
                for pair in wf.typed_search_attributes or []
                if pair.key.name == "ThinkConversationId"
            ]
            if tagged and tagged[0] != self.cid:
                continue  # another conversation's (the fresh ones latency is paired with)
            if not tagged:
                self.untagged.add(wf.id)
            closed = wf.status not in (None, WorkflowExecutionStatus.RUNNING)
            if closed and wf.history_length > 0:
                n = wf.history_length  # visibility has it: no need to fetch a thousand
            else:
                handle = self.temporal.get_workflow_handle(wf.id, run_id=wf.run_id)
                n = len((await handle.fetch_history()).events)
            if closed:
                self.closed[key] = n  # a closed history never changes again
            counts[key] = n
        return counts

    async def quiet(
        self, *, polls: int = 3, every: float = 0.2, limit: float = 15
    ) -> dict[tuple[str, str], int]:
        """A snapshot once `polls` in a row agree (late workflow tasks and visibility landed)."""
        deadline = time.monotonic() + limit
        last = await self.snapshot()
        same = 1
        while same < polls:
            if time.monotonic() > deadline:
                raise RuntimeError(f"Temporal histories of {self.cid} never settled")
            await asyncio.sleep(every)
            now = await self.snapshot()
            same = same + 1 if now == last else 1
            last = now
        return last

    async def events_of(self, turn: Callable[[], Awaitable[float]]) -> tuple[int, float]:
        """Run one turn between two quiet snapshots: (events it added, its latency)."""
        before = await self.quiet()
        elapsed = await turn()
        after = await self.quiet()
        return sum(n - before.get(key, 0) for key, n in after.items()), elapsed


async def long_conversation(
    temporal: Client,
    turn: Callable[[str], Awaitable[float]],
    cid: str,
    turns: int,
    window: int,
) -> dict[str, Any]:
    """Turn 1 and turn N of one conversation: history events, and latency p50 of its first
    and last `window` turns. Each of the last is paired with a turn in one of five fresh
    conversations (turns ~1 to ~`window / 5`), one after the other: on a shared machine the
    pairs see the same load, where the conversation's own first turns ran minutes before."""
    counter = EventCounter(temporal, cid)
    first: list[float] = []
    last: list[float] = []
    fresh: list[float] = []
    events_1, latency = await counter.events_of(lambda: turn(cid))
    first.append(latency)
    for n in range(2, turns):
        latency = await turn(cid)
        if n <= window:
            first.append(latency)
        elif n > turns - window:
            last.append(latency)
            fresh.append(await turn(f"{cid}-fresh-{n % 5}"))
        if n % 100 == 0:
            print(f"  {cid}: {n} turns", flush=True)
    events_n, latency = await counter.events_of(lambda: turn(cid))
    last.append(latency)
    fresh.append(await turn(f"{cid}-fresh-{turns % 5}"))
    return {
        "turns": turns,
        "events_turn_1": events_1,
        "events_turn_n": events_n,
        "latency_first_p50_ms": round(p50(first) * 1000, 1),
        "latency_last_p50_ms": round(p50(last) * 1000, 1),
        "latency_fresh_p50_ms": round(p50(fresh) * 1000, 1),
        "window": window,
        "untagged_workflows": sorted(counter.untagged),
    }


# --------------------------------------------------------------------------- the run


PAIRED = ("direct", "plain")
"""The raw shapes the paired phases are compared with, run again in every round."""


async def measure(args: argparse.Namespace) -> tuple[dict[str, Any], dict[str, Any]]:
    """Our figures and the raw shapes', the paired phases in `--rounds` rounds (see the top)."""
    ours: dict[str, Any] = {}
    raw: dict[str, Any] = {}
    run_id = uuid.uuid4().hex[:6]
    with local_stack() as (stack, model):
        assert model is not None and stack.services is not None
        temporal = await Client.connect(stack.env["TEMPORAL_ADDRESS"])
        limits = httpx.Limits(max_connections=args.concurrency * 2)
        async with httpx.AsyncClient(base_url=stack.api_url, timeout=60, limits=limits) as api:
            seq = [f"t-{run_id}-seq-{i}" for i in range(5)]
            clients = [f"t-{run_id}-tp-{i}" for i in range(args.concurrency)]
            print("warm-up", flush=True)
            for cid in seq:
                await tool_turn(api, model, cid)
                await plain_turn_stream(api, model, cid + "-p")
            for i in range(10):
                await tool_turn(api, model, seq[i % 5])
            await asyncio.gather(*(tool_turn(api, model, cid) for cid in clients))

            rounds: list[dict[str, Any]] = []
            raw_rounds: list[dict[str, dict[str, float]]] = []
            roots = {role: stack.pids.get(role, []) for role in CPU_ROLES}
            cpu = dict.fromkeys(CPU_ROLES, 0.0)
            own = 0.0
            throughput_turns = 0
            throughput_seconds = 0.0
            idle_cpu = idle_seconds = 0.0  # our deployment's, idle while the shapes ran
            for r in range(args.rounds):
                shapes = SHAPES if r == 0 else PAIRED
                print(f"round {r + 1} of {args.rounds}: raw shapes {','.join(shapes)}", flush=True)
                idle0, idle_t0 = sum(tree_cpu(roots).values()), time.perf_counter()
                raw_rounds.append(
                    await asyncio.to_thread(
                        run_shapes, args.shapes_script, args.shapes_n, args.shapes_timeout, shapes
                    )
                )
                idle_cpu += sum(tree_cpu(roots).values()) - idle0
                idle_seconds += time.perf_counter() - idle_t0
                print(f"  (a) {args.turns} sequential tool turns", flush=True)
                tool = [await tool_turn(api, model, seq[i % 5]) for i in range(args.turns)]
                print(f"  (b) {args.turns} sequential plain turns, stream mode", flush=True)
                first_text = [
                    await plain_turn_stream(api, model, seq[i % 5] + "-p")
                    for i in range(args.turns)
                ]
                print(f"  (c) {args.seconds:.0f} s of tool turns at concurrency {args.concurrency}")
                done: list[float] = []
                cpu0, own0 = tree_cpu(roots), own_cpu()
                start = time.perf_counter()
                await asyncio.gather(
                    *(busy_client(api, model, cid, start + args.seconds, done) for cid in clients)
                )
                elapsed = time.perf_counter() - start
                cpu1, own1 = tree_cpu(roots), own_cpu()
                for role in CPU_ROLES:
                    cpu[role] += cpu1[role] - cpu0[role]
                own += own1 - own0
                throughput_turns += len(done)
                throughput_seconds += elapsed
                rounds.append(
                    {
                        "tool_p50_ms": round(p50(tool) * 1000, 1),
                        "tool_p95_ms": round(p95(tool) * 1000, 1),
                        "plain_first_text_p50_ms": round(p50(first_text) * 1000, 1),
                        "plain_first_text_p95_ms": round(p95(first_text) * 1000, 1),
                        "throughput_turns_per_s": round(len(done) / elapsed, 1),
                        "throughput_latency_p50_ms": round(p50(done) * 1000, 1),
                    }
                )
                print(f"  ours {rounds[-1]}", flush=True)
            for key in rounds[0]:
                ours[key] = round(statistics.median(x[key] for x in rounds), 1)
            ours["rounds"] = rounds
            ours["throughput_turns"] = throughput_turns
            ours["cpu_ms_per_turn"] = {
                role: round(cpu[role] / throughput_turns * 1000, 1) for role in CPU_ROLES
            }
            ours["cpu_ms_per_turn"]["bench client + model"] = round(
                own / throughput_turns * 1000, 1
            )
            ours["cpu_cores_busy"] = round((sum(cpu.values()) + own) / throughput_seconds, 2)
            ours["idle_cores_busy_during_shapes"] = round(idle_cpu / idle_seconds, 3)
            raw.update(raw_rounds[0])
            for shape in PAIRED:
                raw[shape] = {
                    key: round(statistics.median(x[shape][key] for x in raw_rounds), 1)
                    for key in raw_rounds[0][shape]
                }
            raw["rounds"] = raw_rounds

            print(f"(d) one conversation of {args.long} tool turns", flush=True)
            ours["long_tool"] = await long_conversation(
                temporal,
                lambda cid: tool_turn(api, model, cid),
                f"t-{run_id}-long-tool",
                args.long,
                args.window,
            )
            print(f"(d) one conversation of {args.long} plain turns", flush=True)
            ours["long_plain"] = await long_conversation(
                temporal,
                lambda cid: plain_turn_wait(api, model, cid),
                f"t-{run_id}-long-plain",
                args.long,
                args.window,
            )
    return ours, raw


@dataclass
class Row:
    measure: str
    ours: float
    raw: float | None
    raw_name: str
    target: str
    passed: bool
    unit: str = ""
    paired: float | None = None
    """The median of the rounds' ratios, for a measure taken in rounds (see the top)."""

    @property
    def ratio(self) -> float | None:
        if self.paired is not None:
            return self.paired
        return None if not self.raw else self.ours / self.raw


def paired_row(
    ours: dict[str, Any], raw: dict[str, Any], key: str, shape: str, figure: str, **row: Any
) -> Row:
    """A row of a paired phase: the medians of both sides' figures, and of the rounds' ratios
    (each round's ours against the raw shape's run just before it)."""
    ratios = [
        ours_r[key] / raw_r[shape][figure]
        for ours_r, raw_r in zip(ours["rounds"], raw["rounds"], strict=True)
    ]
    return Row(
        ours=ours[key],
        raw=raw[shape][figure],
        raw_name=f"{shape} {figure.removesuffix('_ms').replace('_per_s', '/s').replace('_', ' ')}",
        passed=False,
        paired=statistics.median(ratios),
        **row,
    )


def judge(ours: dict[str, Any], raw: dict[str, Any]) -> list[Row]:
    direct, plain = raw["direct"], raw["plain"]
    tool_l, plain_l = ours["long_tool"], ours["long_plain"]
    n = tool_l["turns"]
    rows = [
        paired_row(
            ours, raw, "tool_p50_ms", "direct", "p50_ms", measure="tool turn p50", target="<= 1.0x"
        ),
        paired_row(
            ours, raw, "tool_p95_ms", "direct", "p95_ms", measure="tool turn p95", target="<= 1.0x"
        ),
        paired_row(
            ours,
            raw,
            "plain_first_text_p50_ms",
            "plain",
            "p50_ms",
            measure="plain: first text-delta p50",
            target="<= 1.0x",
        ),
        paired_row(
            ours,
            raw,
            "throughput_turns_per_s",
            "direct",
            "turns_per_s",
            measure="tool turns/s @concurrency",
            target=">= 0.8x",
        ),
    ]
    for row in rows:
        ratio = row.ratio or math.inf
        row.passed = ratio >= 0.8 if row.target.startswith(">=") else ratio <= 1.0
        row.unit = "turns/s" if "turns/s" in row.measure else "ms"
    for kind, long, limit, shape in (
        ("tool", tool_l, 18, direct),
        ("plain", plain_l, 11, plain),
    ):
        e1, en = long["events_turn_1"], long["events_turn_n"]
        rows += [
            Row(
                f"{kind}: events, turn 1",
                e1,
                shape["events"],
                f"{kind_shape(kind)} events",
                f"<= {limit}",
                e1 <= limit,
                "events",
            ),
            Row(
                f"{kind}: events, turn {n}",
                en,
                shape["events"],
                f"{kind_shape(kind)} events",
                f"<= {limit}",
                en <= limit,
                "events",
            ),
            Row(f"{kind}: events, turn {n} vs 1", en, e1, "turn 1", "= 1.0x", en == e1, "events"),
        ]
        a, b = long["latency_fresh_p50_ms"], long["latency_last_p50_ms"]
        rows.append(
            Row(
                f"{kind}: latency p50, turn ~{n} vs ~1",
                b,
                a,
                "turn ~1, paired",
                "<= 1.25x",
                b <= 1.25 * a,
                "ms",
            )
        )
    return rows


def kind_shape(kind: str) -> str:
    return "direct" if kind == "tool" else "plain"


def print_table(rows: list[Row], ours: dict[str, Any], long: int) -> None:
    head = f"{'measure':34} {'ours':>10} {'raw':>9} {'(raw shape)':16} {'ratio':>6} {'target':>9}"
    print("\n" + head + "  result")
    print("-" * (len(head) + 8))
    for r in rows:
        ratio = "" if r.ratio is None else f"{r.ratio:.2f}x"
        raw = "" if r.raw is None else f"{r.raw:g}"
        print(
            f"{r.measure:34} {r.ours:>10g} {raw:>9} {r.raw_name:16} {ratio:>6} {r.target:>9}"
            f"  {'PASS' if r.passed else 'FAIL'}"
        )
    window = ours["long_tool"]["window"]
    print(
        f"\nlong conversations: {long} turns each; latency: the last {window} turns, each paired "
        f"with a turn ~1 of a fresh conversation; the conversation's own first {window}: "
        + ", ".join(
            f"{kind} {ours[kind]['latency_first_p50_ms']:g} ms"
            for kind in ("long_tool", "long_plain")
        )
    )
    cpu = ours["cpu_ms_per_turn"]
    print(
        f"CPU per tool turn at {ours['throughput_turns_per_s']} turns/s "
        f"({ours['cpu_cores_busy']} cores busy): "
        + ", ".join(f"{role} {ms:g} ms" for role, ms in cpu.items())
    )
    print(
        f"(a)-(c) in {len(ours['rounds'])} rounds, each after a run of the raw shapes, during "
        f"which our idle deployment kept {ours['idle_cores_busy_during_shapes']:g} cores busy; "
        "per round, ours: "
        + "; ".join(
            f"{r['tool_p50_ms']:g} / {r['plain_first_text_p50_ms']:g} ms, "
            f"{r['throughput_turns_per_s']:g} turns/s"
            for r in ours["rounds"]
        )
    )
    for kind in ("long_tool", "long_plain"):
        if ours[kind]["untagged_workflows"]:
            print(
                f"{kind}: workflows without ThinkConversationId, counted: "
                f"{ours[kind]['untagged_workflows']}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--shapes-script", type=Path, default=ROOT / "../shared/bench/turn_shapes.py"
    )
    parser.add_argument("--shapes-n", type=int, default=60, help="turn_shapes.py --n")
    parser.add_argument("--shapes-timeout", type=float, default=600)
    parser.add_argument("--turns", type=int, default=60, help="sequential turns of (a), (b)")
    parser.add_argument("--seconds", type=float, default=20, help="throughput phase (c)")
    parser.add_argument("--concurrency", type=int, default=20)
    parser.add_argument("--long", type=int, default=300, help="turns of each long conversation")
    parser.add_argument("--window", type=int, default=20, help="turns of each latency window")
    parser.add_argument(
        "--rounds", type=int, default=3, help="rounds of the paired phases (a)-(c), >= 1"
    )
    args = parser.parse_args()
    if args.long < 2 * args.window:
        parser.error("--long must be at least twice --window")
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    # SIGTERM unwinds like Ctrl-C, so the stack's processes are stopped on the way out.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    started = time.perf_counter()
    print(f"raw shapes: {args.shapes_script}", flush=True)
    args.shapes_script = args.shapes_script.resolve()
    try:
        ours, raw = asyncio.run(measure(args))
    except KeyboardInterrupt:  # everything started has been stopped on the way here
        sys.exit("bench.targets: interrupted")
    rows = judge(ours, raw)
    print_table(rows, ours, args.long)
    seconds = round(time.perf_counter() - started)
    print(f"\n{sum(r.passed for r in rows)} of {len(rows)} targets met; took {seconds} s")
    print(
        json.dumps(
            {
                "bench": "targets",
                "date": datetime.now(UTC).date().isoformat(),
                "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
                "raw": raw,
                "ours": ours,
                "targets": [
                    {
                        "measure": r.measure,
                        "ours": r.ours,
                        "raw": r.raw,
                        "raw_name": r.raw_name,
                        "ratio": None if r.ratio is None else round(r.ratio, 2),
                        "target": r.target,
                        "pass": r.passed,
                    }
                    for r in rows
                ],
                "seconds": seconds,
            }
        )
    )


if __name__ == "__main__":
    main()
