"""Per-tenant limits, shared by every gateway of the deployment: submissions per minute, open
streams (kept in Postgres, `think.storage._limits`).

Submissions are a token bucket per tenant: `burst` at once, refilled at `per_minute`. A
refusal is 429 with `Retry-After` (whole seconds until a token is back). Streams are leases on
the tenant's open SSE responses, taken before a turn is admitted in stream mode, so a refused
stream admits nothing; the gateway renews its streams' leases while they are open, so one
that dies frees its slots within `STREAM_LEASE`.

A limit that is off costs nothing; one that is on costs its request one round trip to
Postgres (docs/architecture.md, "Limits across gateways").
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import psycopg

from api.errors import Problem
from think.server import (
    STREAM_LEASE,
    Store,
    close_stream,
    metrics,
    open_stream,
    renew_streams,
    take_submission,
)

log = logging.getLogger("think.api.limits")
Release = Callable[[], Awaitable[None]]
"""Gives a stream's slot back; calling it again does nothing."""


async def _nothing() -> None:
    return None


@dataclass
class TenantLimits:
    store: Store
    per_minute: float
    """0: no submission limit."""
    burst: int
    max_streams: int
    """0: no stream limit."""
    _leases: set[str] = field(default_factory=set)

    async def take_submission(self, tenant: str) -> None:
        """Spend one of the tenant's submissions, or raise 429."""
        if self.per_minute <= 0:
            return
        refused = await take_submission(
            self.store.db, tenant, per_minute=self.per_minute, burst=self.burst
        )
        if refused is None:
            return
        metrics.RATE_LIMITED.labels("submissions").inc()
        wait = refused.retry_after
        raise Problem(
            429,
            f"too many submissions: this tenant may submit {self.per_minute:g} turns a minute "
            f"(bursts of {self.burst}); retry in {wait} s",
            headers={"Retry-After": str(wait)},
        )

    async def open_stream(self, tenant: str) -> Release:
        """Count one more open stream of the tenant, or raise 429; returns its release."""
        if self.max_streams <= 0:
            return _nothing
        lease = f"{tenant}:{secrets.token_hex(8)}"
        open_now = await open_stream(self.store.db, tenant, lease, cap=self.max_streams)
        if open_now is not None:
            metrics.RATE_LIMITED.labels("streams").inc()
            raise Problem(
                429,
                f"too many open streams: this tenant has {open_now}, the most the deployment "
                f"serves one tenant at once; close one (or follow status_url) and retry",
                headers={"Retry-After": "1"},
            )
        self._leases.add(lease)

        async def release() -> None:
            if lease in self._leases:
                self._leases.discard(lease)
                try:
                    await close_stream(self.store.db, lease)
                except psycopg.Error as exc:
                    # Postgres away (the stream likely ended for that reason): the lease is
                    # no longer renewed, so it frees its slot by itself within STREAM_LEASE.
                    log.info("stream lease %s left to expire: %s", lease, exc)

        return release

    async def renew_forever(self) -> None:
        """Renew the leases of this gateway's open streams, a third of a lease apart."""
        while True:
            await asyncio.sleep(STREAM_LEASE / 3)
            with contextlib.suppress(Exception):  # Postgres away: the next round renews them
                await renew_streams(self.store.db, list(self._leases))
