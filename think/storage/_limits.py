"""Per-tenant limits kept in Postgres, so that they hold across every gateway of a deployment
(migration 0020): a token bucket of submissions, and leases on open streams.

Each check is one statement on an autocommit connection, one round trip: the bucket is one
`INSERT … ON CONFLICT DO UPDATE … RETURNING` (the row lock orders two gateways' takes, and the
update reads the row as the other one left it), a stream slot one call of `think_open_stream`.
A stream's lease outlives its gateway by at most `STREAM_LEASE` seconds: a gateway renews its
open streams' leases, and one that dies stops renewing them.
"""

from __future__ import annotations

import math
from collections.abc import Collection
from typing import NamedTuple

from think.storage._db import Database, fetch_one

STREAM_LEASE = 60.0
"""Seconds an open stream's lease lasts unless its gateway renews it (every third of this)."""

_AVAILABLE = (
    "least(%(burst)s::float8, b.tokens + %(rate)s * greatest(0, extract(epoch FROM "
    "statement_timestamp() - b.refilled_at)))"
)
_TAKE = f"""
    INSERT INTO tenant_limits AS b (tenant, tokens, refilled_at, granted)
    VALUES (%(t)s, greatest(%(burst)s - 1, 0), statement_timestamp(), %(burst)s >= 1)
    ON CONFLICT (tenant) DO UPDATE SET
        tokens = CASE WHEN {_AVAILABLE} >= 1 THEN {_AVAILABLE} - 1 ELSE {_AVAILABLE} END,
        refilled_at = greatest(b.refilled_at, statement_timestamp()),
        granted = {_AVAILABLE} >= 1
    RETURNING granted, tokens
"""


class Refused(NamedTuple):
    """A submission over the tenant's rate: how long until a token is back."""

    retry_after: int
    """Whole seconds, at least 1."""


async def take_submission(
    db: Database, tenant: str, *, per_minute: float, burst: int
) -> Refused | None:
    """Spend one of the tenant's submissions (a bucket of `burst`, refilled at `per_minute`);
    None when it was there, else how long to wait."""
    rate = per_minute / 60.0
    async with db.connection() as conn:
        row = await fetch_one(conn, _TAKE, {"t": tenant, "burst": burst, "rate": rate})
    assert row is not None  # an upsert with RETURNING answers its row
    if row["granted"]:
        return None
    return Refused(max(1, math.ceil((1.0 - float(row["tokens"])) / rate)))


async def open_stream(db: Database, tenant: str, lease_id: str, *, cap: int) -> int | None:
    """Take a stream slot under the lease `lease_id`; None when taken, else how many streams
    the tenant has open (at the cap)."""
    async with db.connection() as conn:
        row = await fetch_one(
            conn,
            "SELECT think_open_stream(%(t)s, %(id)s, %(cap)s, %(lease)s) AS open_now",
            {"t": tenant, "id": lease_id, "cap": cap, "lease": STREAM_LEASE},
        )
    assert row is not None
    found = int(row["open_now"])
    return None if found < 0 else found


async def close_stream(db: Database, lease_id: str) -> None:
    async with db.connection() as conn:
        await conn.execute("DELETE FROM stream_leases WHERE id = %(id)s", {"id": lease_id})


async def renew_streams(db: Database, lease_ids: Collection[str]) -> None:
    """Extend the leases of the streams this gateway still serves."""
    if not lease_ids:
        return
    async with db.connection() as conn:
        await conn.execute(
            "UPDATE stream_leases SET expires_at = clock_timestamp() + make_interval(secs => "
            "%(lease)s) WHERE id = ANY(%(ids)s)",
            {"ids": list(lease_ids), "lease": STREAM_LEASE},
        )
