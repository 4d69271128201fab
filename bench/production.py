"""The production shape under faults (issue 37): two gateways, three workers, a steady load of
streamed turns, then a rolling restart of every worker (SIGTERM, one at a time, each
replacement polling before the next is stopped), a worker SIGKILLed, a gateway SIGKILLed with
streams open, Postgres restarted, Temporal restarted.

    python -m bench.production [--clients 8] [--steady 20] [--settle 5]

The same shape and checks as tests/durability/test_production_shape.py (tests/_production.py),
measured: turn latency (submission to the stream's `[DONE]`, as the client saw it, retries and
resumes included) p50/p95/max of the turns in flight during each phase (submitted before it
ended, ended after it began), the steady phase's beside the rolling restart's; `--warmup`
seconds of load before the steady phase are not counted. Then the counts: turns, statuses,
recoveries, model calls, resubmissions, stream resumes, and the problems found (lost, answered
twice, stream gaps: must be 0), and the slowest turns.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
from pathlib import Path

from tests._production import Load, check, deployment, latencies, p95, retries, run_faults


def _line(name: str, took: list[float]) -> str:
    if not took:
        return f"{name:<20} no turns"
    return (
        f"{name:<20} turns {len(took):>4}, p50 {statistics.median(took):5.2f} s, "
        f"p95 {p95(took):5.2f} s, max {max(took):5.2f} s"
    )


async def run(args: argparse.Namespace) -> None:
    with (
        tempfile.TemporaryDirectory(prefix="think-production-") as tmp,
        deployment(Path(tmp)) as shape,
    ):
        async with Load(shape, clients=args.clients, words=args.words, delay=args.delay) as load:
            await asyncio.sleep(args.warmup)  # the first turns meet cold pools and imports
            async with shape.phase("steady"):
                await asyncio.sleep(args.steady)
            found = await run_faults(shape, load, settle=args.settle)
            await load.drain()
        outcome = await check(shape, load.runs)
        print("\n".join(shape.timeline))
        print(
            f"\nclients {args.clients}, answers of {args.words} words streamed at one per "
            f"{args.delay} s (steady turn ~{args.words * args.delay:.1f} s of streaming)"
        )
        for name, start, end in shape.phases:
            print(_line(name, latencies(load.runs, start, end)))
        every = [r.latency for r in load.runs if r.latency is not None]
        print(_line("whole run", every))
        exits = ", ".join(f"{s:.1f}" for s in found["sigterm_exit_seconds"])
        print(f"SIGTERMed workers exited after {exits} s")
        print(f"streams open on the gateway killed: {found['streams_cut']}")
        print(outcome.summary())
        for problem in outcome.problems[:20]:
            print(" ", problem)
        print("the slowest turns (submitted at, from the steady phase's start):")
        origin = shape.phases[0][1]
        ended = [r for r in load.runs if r.latency is not None]
        for r in sorted(ended, key=lambda r: -(r.latency or 0))[:12]:
            print(
                f"  {r.cid}: at {r.submitted - origin:6.1f} s took {r.latency:5.2f} s, "
                f"{r.posts} submissions, {r.connections} stream connections, "
                f"{retries(r.events)} retries shown, model asked {shape.model.calls(r.cid)}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--steady", type=float, default=20.0)
    parser.add_argument("--settle", type=float, default=5.0)
    parser.add_argument("--warmup", type=float, default=5.0)
    parser.add_argument("--words", type=int, default=12)
    parser.add_argument("--delay", type=float, default=0.1)
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
