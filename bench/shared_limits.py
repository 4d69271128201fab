"""What the deployment-wide limits cost a submission (issue 37): one statement, one round trip
to Postgres, beside a bare `SELECT 1` (a round trip and nothing else).

python -m bench.shared_limits [--calls 2000] [--concurrency 8]

A fresh embedded Postgres. Sequentially, `--calls` each of: `SELECT 1`; a submission taken
from a tenant's bucket (`take_submission`, an upsert of the tenant's row); a stream slot taken
and given back (`open_stream`, the `think_open_stream` function, then `close_stream`). Then
the bucket again from `--concurrency` tasks at once on one tenant (its row lock is the one
point of contention: every gateway's submissions for that tenant queue on it) and on as many
tenants. Median and p95 in ms.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from think._settings import Settings
from think.dev import start_services
from think.storage import Database, close_stream, migrate_now, open_stream, take_submission

BIG = 10**9
"""A burst no run empties: every take is granted, as most are."""


def _report(name: str, took: list[float]) -> None:
    took = sorted(took)
    p95 = took[int(len(took) * 0.95) - 1]
    print(f"{name:<44} median {statistics.median(took):.3f} ms, p95 {p95:.3f} ms", flush=True)


async def _timed(call: Callable[[], Awaitable[object]], calls: int) -> list[float]:
    took = []
    for _ in range(calls):
        started = time.perf_counter()
        await call()
        took.append((time.perf_counter() - started) * 1000)
    return took


async def run(url: str, calls: int, concurrency: int) -> None:
    db = await Database(url, min_size=concurrency, max_size=concurrency).open()
    try:

        async def select_one() -> None:
            async with db.connection() as conn:
                await conn.execute("SELECT 1")

        async def take(tenant: str = "bench") -> None:
            assert await take_submission(db, tenant, per_minute=BIG, burst=BIG) is None

        lease = 0

        async def stream() -> None:
            nonlocal lease
            lease += 1
            assert await open_stream(db, "bench", f"l{lease}", cap=BIG) is None
            await close_stream(db, f"l{lease}")

        await _timed(select_one, 200)  # warm the pool and the plans
        await _timed(take, 200)
        _report("SELECT 1 (one round trip)", await _timed(select_one, calls))
        _report("take_submission", await _timed(take, calls))
        _report("open_stream + close_stream (two)", await _timed(stream, calls // 2))
        for name, tenants in (
            (f"take_submission, {concurrency} at once, 1 tenant", ["hot"] * concurrency),
            (
                f"take_submission, {concurrency} at once, {concurrency} tenants",
                [f"t{i}" for i in range(concurrency)],
            ),
        ):

            async def one(tenant: str) -> list[float]:
                return await _timed(lambda: take(tenant), calls // concurrency)

            results = await asyncio.gather(*(one(t) for t in tenants))
            _report(name, [ms for r in results for ms in r])
    finally:
        await db.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=8)
    args = parser.parse_args()
    with (
        tempfile.TemporaryDirectory(prefix="think-bench-") as tmp,
        start_services(Path(tmp)) as services,
    ):
        settings = services.settings(Settings())
        migrate_now(settings)
        asyncio.run(run(settings.libpq_url, args.calls, args.concurrency))


if __name__ == "__main__":
    main()
