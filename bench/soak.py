"""A soak (issue 37): the production shape (two gateways, three workers) under a steady load
of streamed turns through HTTP for `--minutes`, sampled once a minute: the memory of every
process, Postgres's connections, the turn latency. What should stay flat, and does it?

    python -m bench.soak --minutes 10 [--clients 6]

Memory: RSS of each gateway, each worker and the Temporal dev server; for Postgres the PSS of
its whole tree (postmaster and backends: their RSS counts the shared buffers once per backend,
PSS shares them out). Connections: `pg_stat_activity`'s client backends. Latency: p95 of the
turns that ended within the minute (submission to the stream's `[DONE]`). Each series' slope
is fitted (least squares) from minute 2 on (minute 1 warms up: pools fill, code is imported)
and extrapolated to an hour. At the end every turn is checked as the production test checks
it (tests/_production.py: one turn per key, completed, stored once, streamed whole).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import tempfile
import time
from pathlib import Path

import psutil
import psycopg

from tests._production import Deployment, Load, check, deployment, p95

MB = 1024 * 1024


def _tree(pid: int) -> list[psutil.Process]:
    root = psutil.Process(pid)
    return [root, *root.children(recursive=True)]


def memory(shape: Deployment) -> dict[str, float]:
    """MB by process: `api-1`, `worker-2`, ..., `temporal` (RSS), `postgres` (tree's PSS)."""
    found: dict[str, float] = {}
    for role in ("api", "worker"):
        for n, pid in enumerate(shape.pids[role], 1):
            found[f"{role}-{n}"] = psutil.Process(pid).memory_info().rss / MB
    found["temporal"] = sum(p.memory_info().rss for p in _tree(shape.temporal.pid)) / MB
    pss = 0
    for proc in _tree(shape.postgres.pid):
        with contextlib.suppress(psutil.NoSuchProcess):  # a backend that ended meanwhile
            pss += proc.memory_full_info().pss
    found["postgres"] = pss / MB
    return found


async def connections(url: str) -> int:
    async with await psycopg.AsyncConnection.connect(url) as conn:
        cursor = await conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend' "
            "AND pid <> pg_backend_pid()"
        )
        row = await cursor.fetchone()
    assert row is not None
    return int(row[0])


def slope(values: list[float]) -> float:
    """Least-squares slope per minute of values sampled once a minute."""
    if len(values) < 2:
        return 0.0
    return statistics.linear_regression(range(len(values)), values).slope


async def run(args: argparse.Namespace) -> None:
    with (
        tempfile.TemporaryDirectory(prefix="think-soak-") as tmp,
        deployment(Path(tmp), keep=0) as shape,
    ):
        samples: list[dict[str, float]] = []
        async with Load(shape, clients=args.clients, words=args.words, delay=args.delay) as load:
            start = time.monotonic()
            for minute in range(1, args.minutes + 1):
                await asyncio.sleep(start + minute * 60 - time.monotonic())
                ended = [
                    r.latency
                    for r in load.runs
                    if r.ended is not None and start + (minute - 1) * 60 <= r.ended
                    if r.ended < start + minute * 60 and r.latency is not None
                ]
                sample = memory(shape)
                sample["pg connections"] = await connections(shape.postgres.url)
                sample["turns"] = len(ended)
                sample["p95 s"] = p95(ended)
                samples.append(sample)
                print(
                    f"minute {minute}: " + ", ".join(f"{k} {v:.3g}" for k, v in sample.items()),
                    flush=True,
                )
            await load.drain()
        outcome = await check(shape, load.runs, model_calls=False)

    print(f"\nclients {args.clients}, {args.minutes} minutes; {outcome.summary()}")
    for problem in outcome.problems[:20]:
        print(" ", problem)
    print(
        f"{'series':<16} {'minute 1':>10} {'minute 2':>10} {'last':>10} {'slope/min':>10} "
        f"{'per hour':>10} {'per hour %':>10}"
    )
    for key in samples[0]:
        series = [s[key] for s in samples]
        fitted = series[1:]  # minute 1 warms up
        per_minute = slope(fitted)
        base = fitted[0] if fitted and fitted[0] else float("nan")
        print(
            f"{key:<16} {series[0]:>10.3g} {fitted[0] if fitted else float('nan'):>10.3g} "
            f"{series[-1]:>10.3g} {per_minute:>+10.3g} {per_minute * 60:>+10.3g} "
            f"{per_minute * 60 / base * 100:>+9.1f}%"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--minutes", type=int, default=10)
    parser.add_argument("--clients", type=int, default=6)
    parser.add_argument("--words", type=int, default=12)
    parser.add_argument("--delay", type=float, default=0.1)
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
