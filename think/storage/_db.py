"""The process's Postgres connection pool (psycopg 3), and the connection type stores use.

The hot path talks to psycopg directly. Measured here, a short statement through SQLAlchemy's
asyncio layer cost 0.5-4 ms (greenlet hops, statement compilation, pool reset), against
0.12 ms through psycopg; a turn runs a few dozen statements, so that difference was most of a
turn's latency. SQLAlchemy still describes the schema (`_tables.py`) for Alembic.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import AsyncIterator, Iterator
from typing import Any

import orjson
from psycopg import AsyncConnection
from psycopg.rows import DictRow, dict_row
from psycopg.types.json import set_json_loads
from psycopg_pool import AsyncConnectionPool

Conn = AsyncConnection[DictRow]


async def _configure(conn: Conn) -> None:
    # JSONB columns (message parts, turn drafts) decode with orjson: a model step reads the
    # whole transcript, and the standard library's decoder was most of that read's time.
    set_json_loads(orjson.loads, conn)


class Database:
    """A pool of autocommit connections: reads are one round trip, writes open a transaction."""

    def __init__(self, url: str, *, min_size: int = 2, max_size: int = 10) -> None:
        """`url` in libpq form (`Settings.libpq_url`)."""
        self._pool: AsyncConnectionPool[Conn] = AsyncConnectionPool(
            url,
            min_size=min(min_size, max_size),
            max_size=max_size,
            kwargs={"autocommit": True, "row_factory": dict_row},
            configure=_configure,
            open=False,
            name="think",
            # Answer "Postgres is down" within seconds instead of hanging a request for 30 s.
            timeout=10,
        )

    async def open(self) -> Database:
        await self._pool.open(wait=True, timeout=30)
        return self

    async def close(self) -> None:
        await self._pool.close()

    def pool_stats(self) -> dict[str, int]:
        """The pool's size (open connections), available (idle), max and waiting (requests
        queued for a connection), for metrics."""
        stats = self._pool.get_stats()
        return {
            "size": stats.get("pool_size", 0),
            "available": stats.get("pool_available", 0),
            "max": stats.get("pool_max", 0),
            "waiting": stats.get("requests_waiting", 0),
        }

    @contextlib.asynccontextmanager
    async def connection(self) -> AsyncIterator[Conn]:
        """A connection for reads (each statement commits by itself)."""
        async with self._pool.connection() as conn:
            yield conn

    @contextlib.asynccontextmanager
    async def transaction(self) -> AsyncIterator[Conn]:
        """A connection inside one transaction: committed on exit, rolled back on error."""
        async with self._pool.connection() as conn, conn.transaction():
            yield conn


async def fetch_one(conn: Conn, query: Any, params: dict[str, Any] | None = None) -> DictRow | None:
    cursor = await conn.execute(query, params)
    return await cursor.fetchone()


async def fetch_all(conn: Conn, query: Any, params: dict[str, Any] | None = None) -> list[DictRow]:
    cursor = await conn.execute(query, params)
    return await cursor.fetchall()


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Decoding a long transcript makes hundreds of thousands of objects, none of them
    garbage, and the garbage collector's passes over them (and over everything else the
    process holds) cost as much as the decoding itself: 10,000 messages took 574 ms with it,
    341 ms without (docs/benchmarks.md). Paused for that moment only, and left as it was (an
    application may have turned it off itself)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
