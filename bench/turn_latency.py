"""Latency of a turn through HTTP: submit -> first SSE chunk -> completion.

    python -m bench.turn_latency                # scripted instant model (fake OpenAI server)
    python -m bench.turn_latency --offline      # the built-in offline model, no endpoint
    python -m bench.turn_latency --turns 200

Reports p50/p95 of: first SSE chunk of a plain turn (any chunk, and the first text-delta),
completion of a plain turn, and completion of a tool turn (two model calls, one tool).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

import httpx

from bench._stack import local_stack
from think.testing import FakeOpenAIServer, text, tool_call


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * p))] * 1000


def report(name: str, values: list[float]) -> None:
    print(
        f"{name:<34} p50 {pct(values, 0.5):7.1f} ms   p95 {pct(values, 0.95):7.1f} ms   "
        f"mean {statistics.mean(values) * 1000:7.1f} ms   n={len(values)}"
    )


async def plain_turns(api: httpx.AsyncClient, agent: str, n: int, *, quiet: bool = False) -> None:
    first: list[float] = []
    first_text: list[float] = []
    done: list[float] = []
    for i in range(n):
        url = f"/v1/agents/{agent}/conversations/bench-plain-{i % 5}/turns"
        t0 = time.perf_counter()
        got_first = got_text = None
        lines: list[str] = []
        async with api.stream("POST", url, json={"input": "Hi there", "mode": "stream"}) as r:
            async for line in r.aiter_lines():
                lines.append(line)
                if not line.startswith("data:"):
                    continue
                now = time.perf_counter() - t0
                got_first = got_first if got_first is not None else now
                if got_text is None and '"text-delta"' in line:
                    got_text = now
        done.append(time.perf_counter() - t0)
        assert got_first is not None and got_text is not None, "\n".join(lines)
        first.append(got_first)
        first_text.append(got_text)
    if quiet:
        return
    report("plain turn: first SSE chunk", first)
    report("plain turn: first text-delta", first_text)
    report("plain turn: [DONE]", done)


async def tool_turns(
    api: httpx.AsyncClient, model: FakeOpenAIServer, n: int, *, quiet: bool = False
) -> None:
    done: list[float] = []
    for i in range(n):
        cid = f"bench-tool-{i}"
        model.script(cid, tool_call("add", {"a": 1, "b": 2}), text("It is 3."))
        t0 = time.perf_counter()
        r = await api.post(
            f"/v1/agents/helper/conversations/{cid}/turns", json={"input": "1+2?", "mode": "wait"}
        )
        done.append(time.perf_counter() - t0)
        assert r.json()["status"] == "completed", r.text
    if not quiet:
        report("tool turn (2 model calls, 1 tool)", done)


async def run(args: argparse.Namespace) -> None:
    with local_stack(offline=args.offline) as (stack, model):
        async with httpx.AsyncClient(base_url=stack.api_url, timeout=60) as api:
            agent = "assistant" if args.offline else "helper"
            await plain_turns(api, agent, 10, quiet=True)  # warm-up
            print(
                f"model: {'offline' if args.offline else 'scripted instant (fake OpenAI server)'}"
            )
            await plain_turns(api, agent, args.turns)
            if model is not None:
                await tool_turns(api, model, 10, quiet=True)
                await tool_turns(api, model, args.turns)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--offline", action="store_true")
    parser.add_argument("--turns", type=int, default=100)
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
