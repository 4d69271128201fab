"""Turns under fire: N concurrent tool turns while workers are SIGKILLed every few seconds.

    python -m bench.chaos --turns 100 --workers 2 --kill-every 3

Each turn calls a tool with a countable side effect, then streams a slow answer. A random
worker is killed and replaced every `--kill-every` seconds until every turn has ended (or the
deadline passes). Reports turns completed, lost, duplicated messages, duplicate tool
executions, and completion times.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import random
import tempfile
import time
from collections import Counter
from pathlib import Path

import httpx

from bench._stack import local_stack
from tests._stack import Stack
from think.testing import reply, text, tool_call

WORDS = [f"w{i} " for i in range(30)]


async def run_turn(api: httpx.AsyncClient, cid: str, out: dict[str, object]) -> None:
    t0 = time.perf_counter()
    # As a careful client would: an idempotency key, and the same request again on a timeout.
    response = None
    for attempt in range(10):
        try:
            response = await api.post(
                f"/v1/agents/helper/conversations/{cid}/turns",
                json={"input": cid},
                headers={"Idempotency-Key": cid},
            )
            if response.status_code < 500:
                break
        except httpx.HTTPError:
            pass
        await asyncio.sleep(0.5 * (attempt + 1))
    assert response is not None, f"{cid}: never admitted"
    turn = response.json()
    url = f"/v1/agents/helper/conversations/{cid}/turns/{turn['turn_id']}"
    while True:
        try:
            current = (await api.get(url)).json()
        except httpx.HTTPError:
            current = {"status": "pending"}
        if current["status"] not in ("pending", "running"):
            out[cid] = (current, time.perf_counter() - t0)
            return
        await asyncio.sleep(0.2)


async def killer(stack: Stack, every: float, stop: asyncio.Event, kills: list[float]) -> None:
    while not stop.is_set():
        try:
            await asyncio.wait_for(stop.wait(), every)
            return
        except TimeoutError:
            pass
        live = [p for p in stack.processes if p.name == "worker" and p.popen.poll() is None]
        if live:
            random.choice(live).kill()
            kills.append(time.perf_counter())
            stack.start_worker()


async def run(args: argparse.Namespace) -> None:
    log = Path(tempfile.mkdtemp(prefix="think-chaos-")) / "tool-runs.log"
    with local_stack(workers=args.workers, env={"THINK_TEST_TOOL_LOG": str(log)}) as (
        stack,
        model,
    ):
        assert model is not None
        cids = [f"chaos-{i}" for i in range(args.turns)]
        for cid in cids:
            # Spare answers for retried steps (a retried first step answers without the tool):
            # a turn on a worker killed every few seconds may be asked many times.
            model.script(
                cid, tool_call("record", {"note": cid}), *[reply(text(*WORDS), delay=0.05)] * 30
            )
        results: dict[str, object] = {}
        stop = asyncio.Event()
        kills: list[float] = []
        limits = httpx.Limits(max_connections=args.turns + 10)
        async with httpx.AsyncClient(base_url=stack.api_url, timeout=30, limits=limits) as api:
            chaos = asyncio.create_task(killer(stack, args.kill_every, stop, kills))
            with contextlib.suppress(TimeoutError):  # what is left unfinished counts as lost
                await asyncio.wait_for(
                    asyncio.gather(*(run_turn(api, cid, results) for cid in cids)),
                    args.deadline,
                )
            stop.set()
            await chaos
            messages = {
                cid: (await api.get(f"/v1/agents/helper/conversations/{cid}/messages")).json()[
                    "messages"
                ]
                for cid in cids
            }
    runs = (
        Counter(line.split(" ")[0] for line in log.read_text().splitlines())
        if log.exists()
        else Counter()
    )
    statuses = Counter(r[0]["status"] for r in results.values())  # type: ignore[index]
    lost = len(cids) - len(results)
    expected = "".join(WORDS)
    duplicated = sum(
        1 for cid in cids if sum(1 for m in messages[cid] if m["role"] == "assistant") != 1
    )
    wrong = sum(
        1
        for cid in cids
        if messages[cid] and messages[cid][-1]["parts"][-1].get("text") != expected
    )
    for cid in [c for c in cids if c in results][:100]:
        answers = [m for m in messages[cid] if m["role"] == "assistant"]
        if len(answers) != 1 or answers[-1]["parts"][-1].get("text") != expected:
            status = results[cid][0]["status"]  # type: ignore[index]
            texts = [a["parts"][-1].get("text", a["parts"][-1].get("type")) for a in answers]
            print(f"  {cid}: status {status}, {len(answers)} answers: {texts}")
    times = sorted(r[1] for r in results.values())  # type: ignore[index]
    print(f"turns: {len(cids)}, workers: {args.workers}, workers killed: {len(kills)}")
    print(f"statuses: {dict(statuses)}; lost (no terminal status by the deadline): {lost}")
    print(f"turns whose stored answer is missing or doubled: {duplicated}")
    print(f"turns whose stored answer is not the scripted one: {wrong}")
    print(
        f"tool side effects: {sum(runs.values())} in {len(runs)} turns; "
        f"run more than once: {sum(1 for n in runs.values() if n > 1)}"
    )
    if times:
        print(
            f"completion time p50 {times[len(times) // 2]:.1f} s, "
            f"p95 {times[int(len(times) * 0.95)]:.1f} s, max {times[-1]:.1f} s"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, default=100)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--kill-every", type=float, default=3.0)
    parser.add_argument("--deadline", type=float, default=300.0)
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
