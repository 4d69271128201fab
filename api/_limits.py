"""Per-tenant limits of one gateway process: submissions per minute, open streams.

Kept in memory, per process: a deployment of N gateways lets a tenant N times the limit (say
so in the setting). A limit shared across replicas would cost every submission a Postgres
round trip (or another service); these exist to stop one tenant's runaway script from
starving the others, which a per-process bound does.

Submissions are a token bucket per tenant: `burst` at once, refilled at `per_minute`. A
refusal is 429 with `Retry-After` (whole seconds until a token is back). Streams are a count
of the tenant's open SSE responses, taken before a turn is admitted in stream mode, so a
refused stream admits nothing.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from api.errors import Problem
from think.server import metrics


@dataclass
class _Bucket:
    tokens: float
    at: float


@dataclass
class TenantLimits:
    per_minute: float
    """0: no submission limit."""
    burst: int
    max_streams: int
    """0: no stream limit."""
    _buckets: dict[str, _Bucket] = field(default_factory=dict)
    _streams: dict[str, int] = field(default_factory=dict)

    def take_submission(self, tenant: str) -> None:
        """Spend one of the tenant's submissions, or raise 429."""
        if self.per_minute <= 0:
            return
        now = time.monotonic()
        rate = self.per_minute / 60.0
        bucket = self._buckets.setdefault(tenant, _Bucket(tokens=float(self.burst), at=now))
        bucket.tokens = min(float(self.burst), bucket.tokens + (now - bucket.at) * rate)
        bucket.at = now
        if bucket.tokens >= 1.0:
            bucket.tokens -= 1.0
            return
        wait = max(1, math.ceil((1.0 - bucket.tokens) / rate))
        metrics.RATE_LIMITED.labels("submissions").inc()
        raise Problem(
            429,
            f"too many submissions: this tenant may submit {self.per_minute:g} turns a minute "
            f"(bursts of {self.burst}); retry in {wait} s",
            headers={"Retry-After": str(wait)},
        )

    def open_stream(self, tenant: str) -> Callable[[], None]:
        """Count one more open stream of the tenant, or raise 429; returns its release."""
        open_now = self._streams.get(tenant, 0)
        if self.max_streams > 0 and open_now >= self.max_streams:
            metrics.RATE_LIMITED.labels("streams").inc()
            raise Problem(
                429,
                f"too many open streams: this tenant has {open_now}, the most a gateway "
                f"serves one tenant at once; close one (or follow status_url) and retry",
                headers={"Retry-After": "1"},
            )
        self._streams[tenant] = open_now + 1
        released = False

        def release() -> None:
            nonlocal released
            if not released:
                released = True
                left = self._streams.get(tenant, 1) - 1
                if left > 0:
                    self._streams[tenant] = left
                else:
                    self._streams.pop(tenant, None)

        return release
