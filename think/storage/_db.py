"""The process's Postgres connection pool (psycopg 3), and the connection type stores use.

The hot path talks to psycopg directly: a short statement through SQLAlchemy's asyncio layer
(greenlet hops, statement compilation, pool reset) cost many times what it costs through
psycopg, and a turn runs a few dozen statements (docs/benchmarks.md, "Figures behind code
comments"). SQLAlchemy still describes the schema (`_tables.py`) for Alembic.
"""

from __future__ import annotations

import contextlib
import gc
import json
import logging
import math
import re
import weakref
from collections.abc import AsyncIterator, Iterator
from typing import Any

import orjson
from psycopg import AsyncConnection
from psycopg.abc import Buffer
from psycopg.rows import DictRow, dict_row
from psycopg.types.json import (
    Jsonb,
    JsonbBinaryDumper,
    JsonbBinaryLoader,
    JsonbDumper,
    JsonbLoader,
    set_json_dumps,
    set_json_loads,
)
from psycopg.types.string import BytesBinaryDumper, BytesDumper
from psycopg_pool import AsyncConnectionPool

from think._messages import storable

log = logging.getLogger("think.storage")

Conn = AsyncConnection[DictRow]

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


LARGE_VALUE_BYTES = 1024 * 1024
"""A value this large (a JSON document or a `bytea`, sent or received) marks its connection
to be closed when it goes back to the pool, instead of being kept.

libpq grows a connection's input and output buffers to the largest message they carried and
never shrinks them, so a pooled connection that once carried a 14 MiB workspace file or
message kept up to twice that for the process's life: after one 14 MiB `write`, the worker's
pool held about 90 MB that only closing its connections gave back (docs/benchmarks.md, "A large
workspace write"). A new connection costs a few milliseconds, paid only after such a value."""

_large: weakref.WeakSet[Any] = weakref.WeakSet()
"""Connections that carried a value of `LARGE_VALUE_BYTES` or more since they were taken."""


def _note(connection: Any, size: int) -> None:
    if size >= LARGE_VALUE_BYTES and connection is not None:
        _large.add(connection)


def _noted(connection: Any, data: Buffer | None) -> Buffer | None:
    _note(connection, len(data or b""))
    return data


def note_large(conn: Conn, size: int) -> None:
    """`conn` received a value of `size` bytes (a `bytea` read: psycopg's C row loader hands
    Python loaders views, which its escaping functions refuse, so reads are noted by their
    callers); past `LARGE_VALUE_BYTES` it is closed when released."""
    _note(conn, size)


class _NotedBytesDumper(BytesDumper):
    def dump(self, obj: Buffer) -> Buffer | None:
        _note(self.connection, len(obj))
        return super().dump(obj)


class _NotedBytesBinaryDumper(BytesBinaryDumper):
    def dump(self, obj: Buffer) -> Buffer | None:
        _note(self.connection, len(obj))
        return super().dump(obj)


# The JSON functions are set as psycopg's loaders and dumpers take them, per subclass
# (`_loads`, `_dumps`). JSONB columns (message parts, turn drafts) decode with orjson: a model
# step reads the whole transcript, and the standard library's decoder was most of that read's
# time. What Postgres cannot store is replaced on the way in (`storable_json`, the backstop).


class _NotedJsonbLoader(JsonbLoader):
    _loads = staticmethod(orjson.loads)

    def load(self, data: Buffer) -> Any:
        _note(self.connection, len(data))
        return super().load(data)


class _NotedJsonbBinaryLoader(JsonbBinaryLoader):
    _loads = staticmethod(orjson.loads)

    def load(self, data: Buffer) -> Any:
        _note(self.connection, len(data))
        return super().load(data)


class _NotedJsonbDumper(JsonbDumper):
    _dumps = staticmethod(storable_json)

    def dump(self, obj: Any) -> Buffer | None:
        return _noted(self.connection, super().dump(obj))


class _NotedJsonbBinaryDumper(JsonbBinaryDumper):
    _dumps = staticmethod(storable_json)

    def dump(self, obj: Any) -> Buffer | None:
        return _noted(self.connection, super().dump(obj))


async def _configure(conn: Conn) -> None:
    """The adapters that note a large value (`LARGE_VALUE_BYTES`), in place of psycopg's for
    `jsonb` (both ways) and `bytea` parameters (classes made once, registered per
    connection); a `bytea` read is noted by its reader (`note_large`). Every `Jsonb`
    parameter encodes through the backstop `storable_json`, and a `json` one too."""
    set_json_loads(orjson.loads, conn)
    set_json_dumps(storable_json, conn)
    adapters = conn.adapters
    for jsonb in (_NotedJsonbBinaryDumper, _NotedJsonbDumper):
        adapters.register_dumper(Jsonb, jsonb)
    adapters.register_loader("jsonb", _NotedJsonbLoader)
    adapters.register_loader("jsonb", _NotedJsonbBinaryLoader)
    for cls in (bytes, bytearray, memoryview):
        adapters.register_dumper(cls, _NotedBytesBinaryDumper)
        adapters.register_dumper(cls, _NotedBytesDumper)


async def _shed_if_large(conn: Conn) -> None:
    """Close `conn` if it carried a large value, so the pool opens a fresh one in its place
    rather than keeping its grown buffers (`LARGE_VALUE_BYTES`)."""
    if conn in _large:
        _large.discard(conn)
        await conn.close()


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
            try:
                yield conn
            finally:
                await _shed_if_large(conn)

    @contextlib.asynccontextmanager
    async def transaction(self) -> AsyncIterator[Conn]:
        """A connection inside one transaction: committed on exit, rolled back on error."""
        async with self._pool.connection() as conn:
            try:
                async with conn.transaction():
                    yield conn
            finally:
                await _shed_if_large(conn)


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
    process holds) cost as much as the decoding itself (docs/benchmarks.md, "Figures behind
    code comments"). Paused for that moment only, and left as it was (an application may have
    turned it off itself)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
