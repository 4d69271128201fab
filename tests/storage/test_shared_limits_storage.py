"""The deployment-wide limits' statements under concurrency (migration 0020): many
connections at once, as many gateways would be, take a tenant's burst and its stream slots
exactly once; a lease that expires frees its slot."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator

import pytest

from think._settings import Settings
from think.storage import Database, close_stream, open_stream, take_submission


@pytest.fixture
async def db(settings: Settings, services: object) -> AsyncIterator[Database]:
    database = await Database(settings.libpq_url, min_size=8, max_size=8).open()
    try:
        yield database
    finally:
        await database.close()


async def test_concurrent_takes_give_the_burst_once(db: Database) -> None:
    tenant = f"t-{secrets.token_hex(4)}"
    answers = await asyncio.gather(
        *(take_submission(db, tenant, per_minute=0.001, burst=10) for _ in range(40))
    )
    granted = [a for a in answers if a is None]
    assert len(granted) == 10
    refused = [a for a in answers if a is not None]
    assert all(r.retry_after >= 1 for r in refused)


async def test_concurrent_opens_take_the_cap_once(db: Database) -> None:
    tenant = f"t-{secrets.token_hex(4)}"
    answers = await asyncio.gather(
        *(open_stream(db, tenant, f"{tenant}:{i}", cap=5) for i in range(30))
    )
    assert sum(a is None for a in answers) == 5
    assert {a for a in answers if a is not None} == {5}
    # A closed stream gives its slot back.
    held = [f"{tenant}:{i}" for i, a in enumerate(answers) if a is None]
    await close_stream(db, held[0])
    assert await open_stream(db, tenant, f"{tenant}:again", cap=5) is None


async def test_an_expired_lease_frees_its_slot(db: Database) -> None:
    """A gateway that died stops renewing its leases: past their expiry they count no more."""
    tenant = f"t-{secrets.token_hex(4)}"
    assert await open_stream(db, tenant, f"{tenant}:dead", cap=1) is None
    assert await open_stream(db, tenant, f"{tenant}:next", cap=1) == 1
    async with db.connection() as conn:
        await conn.execute(
            "UPDATE stream_leases SET expires_at = now() - interval '1 second' WHERE id = %(i)s",
            {"i": f"{tenant}:dead"},
        )
    assert await open_stream(db, tenant, f"{tenant}:next", cap=1) is None
