"""What a workspace write's quota check costs as a tenant grows: the conversation's usage is
summed per write (under `workspace_files`' primary key), the tenant's read from its usage row
(migration 0014), which the write's own change updates.

python -m bench.workspace_quota [--conversations 1000,10000,50000] [--files 3] [--writes 200]

A fresh embedded Postgres; for each size, one tenant with that many conversations of `--files`
1 KiB files each (bulk-inserted), then `--writes` writes of a new 1 KiB file each (so every
write grows the workspace and is checked) through `Workspace.write`, each configuration into a
conversation of its own loaded at that size: with the default limits
(the tenant's included), with the tenant limit alone, with the tenant limit off (conversation
sums only), and with no limit at all (no lock, no sum). Median and p95 in ms.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from think._settings import Settings
from think.dev import start_services
from think.storage import Database, Workspace, WorkspaceLimits, migrate_now


async def measure(
    db: Database, uid: str, limits: WorkspaceLimits, writes: int, prefix: str
) -> list[float]:
    workspace = Workspace(db, uid, limits)
    took = []
    for i in range(writes):
        started = time.perf_counter()
        await workspace.write(f"{prefix}/{i}.txt", b"z" * 1024)
        took.append((time.perf_counter() - started) * 1000)
    return took


async def run(url: str, sizes: list[int], files: int, writes: int) -> None:
    db = await Database(url, min_size=1, max_size=2).open()
    try:
        done = 0
        for size in sizes:
            async with db.transaction() as conn:
                await conn.execute(
                    "INSERT INTO conversations (uid, tenant, agent, id) "
                    "SELECT 'b' || g, 'big', 'bench', 'c' || g "
                    "FROM generate_series(%(a)s::int, %(b)s::int) g",
                    {"a": done, "b": size - 1},
                )
                await conn.execute(
                    "INSERT INTO workspace_files (conversation_uid, path, data, media_type, size) "
                    "SELECT 'b' || g, 'f' || f || '.txt', convert_to(repeat('x', 1024), 'UTF8'), "
                    "'text/plain', 1024 FROM generate_series(%(a)s::int, %(b)s::int) g, "
                    "generate_series(1, %(f)s::int) f",
                    {"a": done, "b": size - 1, "f": files},
                )
                await conn.execute("ANALYZE conversations; ANALYZE workspace_files")
            done = size
            for n, (name, limits) in enumerate(
                (
                    ("defaults (tenant row)", WorkspaceLimits()),
                    ("tenant limit only", WorkspaceLimits(max_bytes=0, max_files=0)),
                    ("tenant limit off", WorkspaceLimits(tenant_max_bytes=0)),
                    ("no limits", WorkspaceLimits(max_bytes=0, max_files=0, tenant_max_bytes=0)),
                )
            ):
                # A conversation of its own per run, among those just loaded, so each starts
                # from the same `--files` files and only the tenant's size differs.
                uid = f"b{size - 1 - n}"
                took = sorted(await measure(db, uid, limits, writes, "w"))
                p95 = took[int(len(took) * 0.95) - 1]
                print(
                    f"{size:>7} conversations, {size * files:>7} files: {name:<22} "
                    f"median {statistics.median(took):.2f} ms, p95 {p95:.2f} ms",
                    flush=True,
                )
    finally:
        await db.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--conversations", default="1000,10000,50000")
    parser.add_argument("--files", type=int, default=3)
    parser.add_argument("--writes", type=int, default=200)
    args = parser.parse_args()
    sizes = [int(n) for n in args.conversations.split(",")]
    with (
        tempfile.TemporaryDirectory(prefix="think-bench-") as tmp,
        start_services(Path(tmp)) as services,
    ):
        settings = services.settings(Settings())
        migrate_now(settings)
        asyncio.run(run(settings.libpq_url, sizes, args.files, args.writes))


if __name__ == "__main__":
    main()
