"""Tenant fairness on the task queue: a light tenant's turn latency alone, then while a heavy
tenant floods 1,000 turns, with Temporal's fairness on and off.

    python -m bench.fairness                       # both: fairness on, then off
    python -m bench.fairness --only on --heavy 400

Each mode starts a stack of its own (embedded Postgres and Temporal, one worker, one
gateway): the dev server with `matching.enableFairness` (as `think dev` runs it), or without
it (a namespace that has not enabled it). Two tenants, by API key: `light` and `heavy`.

The shape, and why: a flood queues only if the worker is saturated, and a worker saturated by
CPU would slow every turn alike, fair or not. So the model is slow rather than the worker
busy: every model call takes `--model-seconds` (a scripted stall of the fake OpenAI server),
and the worker runs at most `--slots` workflow tasks at once (THINK_WORKER_WORKFLOW_TASK_SLOTS),
which bounds how many turns step at once well below what the two cores could carry. The
heavy tenant's turns are spread over `--conversations` conversations (the rest queue in
Postgres behind each conversation's running turn, and start as it ends), so at any time
hundreds of heavy workflows wait on the task queue. The light tenant runs `--light-clients`
conversations, one turn at a time each (mode "wait", timed from the POST to its answer):
first alone, then from the moment the whole flood is accepted until it has drained.

Target (issue 37): the light tenant's p95 during the flood at most 2x its p95 alone.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from dataclasses import dataclass, field

import httpx
import psycopg

from bench._stack import local_stack
from bench.turn_latency import pct
from think.testing import reply, stall, text

KEYS = "heavy-key:heavy,light-key:light"


@dataclass
class Result:
    mode: str
    alone: list[float] = field(default_factory=list)
    flooded: list[float] = field(default_factory=list)
    drain: float = 0.0
    submit: float = 0.0


async def light_loop(
    api: httpx.AsyncClient, cid: str, out: list[float], *, turns: int | None, until: asyncio.Event
) -> None:
    done = 0
    while not until.is_set() and (turns is None or done < turns):
        t0 = time.perf_counter()
        r = await api.post(
            f"/v1/agents/helper/conversations/{cid}/turns",
            json={"input": "hello", "mode": "wait"},
            timeout=600,
        )
        assert r.status_code == 200 and r.json()["status"] == "completed", r.text
        out.append(time.perf_counter() - t0)
        done += 1


async def flood(api: httpx.AsyncClient, turns: int, conversations: int, run: str) -> None:
    """Submit `turns` heavy turns round-robin over `conversations`, 32 requests in flight."""
    gate = asyncio.Semaphore(32)

    async def one(i: int) -> None:
        async with gate:
            r = await api.post(
                f"/v1/agents/helper/conversations/heavy-{run}-{i % conversations}/turns",
                json={"input": f"job {i}", "mode": "submit"},
                timeout=120,
            )
            assert r.status_code in (200, 202), r.text

    await asyncio.gather(*(one(i) for i in range(turns)))


async def heavy_ended(database_url: str) -> int:
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        cur = await conn.execute(
            "SELECT count(*) FROM turns t JOIN conversations c ON c.uid = t.conversation_uid "
            "WHERE c.tenant = 'heavy' AND t.completed_at IS NOT NULL"
        )
        row = await cur.fetchone()
        assert row is not None
        return int(row[0])


async def measure(mode: str, args: argparse.Namespace) -> Result:
    env = {"THINK_API_KEYS": KEYS, "THINK_WORKER_WORKFLOW_TASK_SLOTS": str(args.slots)}
    result = Result(mode)
    with local_stack(agents="tests.agents:Helper", env=env, fairness=mode == "on") as (
        stack,
        model,
    ):
        assert model is not None and stack.services is not None
        model.script_default(reply(stall(args.model_seconds), text("ok")), repeat=True)
        database_url = stack.services.database_url
        print(f"fairness {mode}: stack up", flush=True)
        limits = httpx.Limits(max_connections=64)
        heavy = httpx.AsyncClient(
            base_url=stack.api_url, headers={"Authorization": "Bearer heavy-key"}, limits=limits
        )
        light = httpx.AsyncClient(
            base_url=stack.api_url, headers={"Authorization": "Bearer light-key"}, limits=limits
        )
        async with heavy, light:
            never = asyncio.Event()
            cids = [f"light-{i}" for i in range(args.light_clients)]
            # Warm-up, not counted: the first turns of a process pay its imports and pools.
            await asyncio.gather(*(light_loop(light, c, [], turns=2, until=never) for c in cids))
            await asyncio.gather(
                *(
                    light_loop(light, c, result.alone, turns=args.light_turns, until=never)
                    for c in cids
                )
            )
            print(f"fairness {mode}: alone measured; flooding", flush=True)
            t0 = time.perf_counter()
            await flood(heavy, args.heavy, args.conversations, mode)
            result.submit = time.perf_counter() - t0
            drained = asyncio.Event()

            async def watch() -> None:
                # Polled: the ends are in Postgres, written by the worker; no event reaches here.
                while await heavy_ended(database_url) < args.heavy:  # noqa: ASYNC110
                    await asyncio.sleep(0.5)
                drained.set()

            watcher = asyncio.create_task(watch())
            await asyncio.gather(
                *(light_loop(light, c, result.flooded, turns=None, until=drained) for c in cids)
            )
            await watcher
            result.drain = time.perf_counter() - t0
    return result


def report(result: Result, args: argparse.Namespace) -> None:
    alone, flooded = pct(result.alone, 0.95), pct(result.flooded, 0.95)
    print(
        f"fairness {result.mode}: light p50/p95 alone {pct(result.alone, 0.5):.0f}/{alone:.0f} ms "
        f"(n={len(result.alone)}); during the flood {pct(result.flooded, 0.5):.0f}/{flooded:.0f} "
        f"ms (n={len(result.flooded)}); ratio {flooded / alone:.2f}x (target <= 2x); "
        f"{args.heavy} heavy turns submitted in {result.submit:.1f} s, drained in "
        f"{result.drain:.1f} s",
        flush=True,
    )


async def main(args: argparse.Namespace) -> None:
    modes = ["on", "off"] if args.only is None else [args.only]
    for mode in modes:
        report(await measure(mode, args), args)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--heavy", type=int, default=1000, help="the heavy tenant's turns")
    parser.add_argument("--conversations", type=int, default=250)
    parser.add_argument("--light-clients", type=int, default=2)
    parser.add_argument("--light-turns", type=int, default=20, help="each, alone")
    parser.add_argument("--model-seconds", type=float, default=0.5)
    parser.add_argument("--slots", type=int, default=8)
    parser.add_argument("--only", choices=["on", "off"])
    asyncio.run(main(parser.parse_args()))
