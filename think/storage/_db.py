"""The process's Postgres connection pool (psycopg 3), and the connection type stores use.

The hot path talks to psycopg directly. Measured here, a short statement through SQLAlchemy's
asyncio layer cost 0.5-4 ms (greenlet hops, statement compilation, pool reset), against
0.12 ms through psycopg; a turn runs a few dozen statements, so that difference was most of a
turn's latency. SQLAlchemy still describes the schema (`_tables.py`) for Alembic.
"""

from __future__ import annotations

import contextlib
import gc
import json
import logging
import math
import re
from collections.abc import AsyncIterator, Iterator
from typing import Any

import orjson
from psycopg import AsyncConnection
from psycopg.rows import DictRow, dict_row
from psycopg.types.json import set_json_dumps, set_json_loads
from psycopg_pool import AsyncConnectionPool

from think._messages import storable

log = logging.getLogger("think.storage")

Conn = AsyncConnection[DictRow]


async def _configure(conn: Conn) -> None:
    # JSONB columns (message parts, turn drafts) decode with orjson: a model step reads the
    # whole transcript, and the standard library's decoder was most of that read's time.
    set_json_loads(orjson.loads, conn)
    # And every `Jsonb` parameter encodes through the backstop below.
    set_json_dumps(storable_json, conn)


_LONE_SURROGATE = re.compile(
    r"\\ud[89ab][0-9a-f]{2}(?!\\ud[c-f])|(?<!\\ud[89ab][0-9a-f]{2})\\ud[c-f]"
)
"""A lone surrogate as `json.dumps` escapes it (lower-case hex); a pair (an emoji) is not one.
A string holding a backslash and `ud800` as text matches too, which only costs a look."""


def storable_json(value: Any) -> str:
    """`value` as the JSON text of a `jsonb` value Postgres will take: the backstop for content
    that reached storage without passing the door that makes it storable
    (`think._messages.storable`).

    Postgres refuses `\\u0000`, a lone surrogate's escape and `NaN`, and a write it refuses
    would be retried like an outage, the conversation wedged. Such a value is stored with each
    NUL and lone surrogate replaced (U+FFFD) and each non-finite number as null, and a warning
    says a door let it through. The common case costs two substring checks on the
    text `json.dumps` made anyway (ASCII: everything else is escaped).
    """
    try:
        encoded: str | None = json.dumps(value, allow_nan=False)
    except ValueError:
        encoded = None
    if encoded is not None:
        if "\\u0000" not in encoded and (
            "\\ud" not in encoded or _LONE_SURROGATE.search(encoded) is None
        ):
            return encoded
        cleaned = storable(value)
        if cleaned is value:  # a backslash and `u0000` as text, not the character
            return encoded
    else:
        cleaned = _finite(storable(value))
    log.warning(
        "a jsonb value held what Postgres cannot store (NUL, a lone surrogate or NaN) and was "
        "stored with it replaced: make it storable where it enters (think._messages.storable)"
    )
    return json.dumps(cleaned)


def _finite(value: Any) -> Any:
    """`value` with NaN and the infinities as null (pydantic's `inf_nan_mode="null"`)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(item) for item in value]
    return value


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
