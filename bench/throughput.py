"""Tool turns per second with one worker, through HTTP.

    python -m bench.throughput --seconds 20 --concurrency 16

Each turn is two model calls (the scripted instant model) and one tool call. Many
conversations run at once, since turns of one conversation are serialised by design.
"""

from __future__ import annotations

import argparse
import asyncio
import time

import httpx

from bench._stack import local_stack
from think.testing import FakeOpenAIServer, text, tool_call


async def client_loop(
    api: httpx.AsyncClient,
    model: FakeOpenAIServer,
    worker_id: int,
    deadline: float,
    out: list[float],
) -> None:
    cid = f"tp-{worker_id}"  # each client is one user in one conversation
    while time.perf_counter() < deadline:
        model.script(cid, tool_call("add", {"a": 1, "b": 2}), text("3"))
        t0 = time.perf_counter()
        r = await api.post(
            f"/v1/agents/helper/conversations/{cid}/turns", json={"input": "1+2", "mode": "wait"}
        )
        assert r.json()["status"] == "completed", r.text
        out.append(time.perf_counter() - t0)


async def run(args: argparse.Namespace) -> None:
    with local_stack() as (stack, model):
        assert model is not None
        limits = httpx.Limits(max_connections=args.concurrency * 2)
        async with httpx.AsyncClient(base_url=stack.api_url, timeout=60, limits=limits) as api:
            warm: list[float] = []
            await client_loop(api, model, -1, time.perf_counter() + 2, warm)
            latencies: list[float] = []
            start = time.perf_counter()
            deadline = start + args.seconds
            await asyncio.gather(
                *(client_loop(api, model, w, deadline, latencies) for w in range(args.concurrency))
            )
            elapsed = time.perf_counter() - start
        latencies.sort()
        print(
            f"{len(latencies)} tool turns in {elapsed:.1f} s with {args.concurrency} clients: "
            f"{len(latencies) / elapsed:.1f} turns/s; latency p50 "
            f"{latencies[len(latencies) // 2] * 1000:.0f} ms, p95 "
            f"{latencies[int(len(latencies) * 0.95)] * 1000:.0f} ms"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--concurrency", type=int, default=16)
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
