"""A turn's Temporal history and latency at turn 1 and at turn N of one conversation.

python -m bench.history_growth --turns 1000
"""

from __future__ import annotations

import argparse
import asyncio
import time

import httpx
from temporalio.client import Client

from bench._stack import local_stack
from think.workflows.names import turn_workflow_id


async def run(args: argparse.Namespace) -> None:
    with local_stack() as (stack, _):
        temporal = await Client.connect(stack.env["TEMPORAL_ADDRESS"])
        async with httpx.AsyncClient(base_url=stack.api_url, timeout=120) as api:
            url = "/v1/agents/helper/conversations/long/turns"
            samples: dict[int, tuple[str, float]] = {}
            marks = {1, 10, 100, args.turns} | set(
                range(0, args.turns + 1, max(1, args.turns // 10))
            )
            for n in range(1, args.turns + 1):
                t0 = time.perf_counter()
                r = await api.post(url, json={"input": f"message {n}", "mode": "wait"})
                elapsed = time.perf_counter() - t0
                assert r.json()["status"] == "completed", r.text
                if n in marks:
                    samples[n] = (r.json()["turn_id"], elapsed)
            print(f"{'turn':>6} {'events':>7} {'history bytes':>14} {'latency ms':>11}")
            for n in sorted(samples):
                turn_id, elapsed = samples[n]
                handle = temporal.get_workflow_handle(turn_workflow_id("helper", "long", turn_id))
                history = await handle.fetch_history()
                print(
                    f"{n:>6} {len(history.events):>7} {len(history.to_json()):>14} "
                    f"{elapsed * 1000:>11.1f}"
                )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, default=1000)
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
