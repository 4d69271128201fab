"""Per-tenant daily budgets: `THINK_TENANT_DAILY_TOKENS` and `THINK_TENANT_DAILY_COST`.

A budget is over what the tenant's turns created this UTC day spent, as their records keep it
(`think.storage.tenant_spend`: the same steps `GET /v1/usage` sums), so it holds across every
gateway of a deployment and survives restarts; nothing is counted twice on the turn's path.
Past either, a submission answers 429 with the problem type `/problems/budget-exhausted`, the
budget it is over, and `Retry-After` until the next UTC midnight. Turns already admitted run on:
a budget stops new work, it does not cut answers short (that is `turn_budget_*`'s).

The spend is read again at most every `fresh_for` (a second) per tenant and gateway (one indexed
query), so a burst of submissions costs Postgres one read; a tenant may overshoot by what its
turns spend in that moment, as it may by what its running turns spend anyway. Once over, it
stays over until midnight, so that answer is kept without reading again.

Steps of models without a known price count nothing towards the cost budget (their tokens
count towards the token one): give such endpoints `prices` (docs/models.md).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import ClassVar, Literal

from api.errors import Problem
from think.server import Store, TenantSpend, metrics, tenant_spend

BUDGET_EXHAUSTED = "/problems/budget-exhausted"
"""The problem type of a refusal by a daily budget (relative to the gateway's URL, where
`GET /problems/budget-exhausted` says what it means)."""

Budget = Literal["daily_tokens", "daily_cost"]

DESCRIBED = {
    "budget-exhausted": (
        "Budget exhausted\n\n"
        "The tenant's turns have spent one of its daily budgets, which the deployment sets:\n"
        "THINK_TENANT_DAILY_TOKENS (input and output tokens a UTC day) or\n"
        "THINK_TENANT_DAILY_COST (US dollars a UTC day, at the prices of the models' endpoints).\n"
        "The problem's `budget` member says which (`daily_tokens` or `daily_cost`), `used` and\n"
        "`limit` how far; `Retry-After` is the seconds until midnight UTC, when both renew.\n"
        "Turns admitted before run on; GET /v1/usage shows what the day's turns spent.\n"
    ),
}
"""What each problem type of ours means, served at `GET /problems/{name}`."""


@dataclass
class _Seen:
    day: datetime
    spend: TenantSpend
    read_at: float


@dataclass
class DailyBudgets:
    tokens: int | None
    """`THINK_TENANT_DAILY_TOKENS`: input and output tokens a tenant's turns may use a UTC day."""
    cost: float | None
    """`THINK_TENANT_DAILY_COST`: US dollars a tenant's turns may spend a UTC day."""
    fresh_for: ClassVar[float] = 1.0
    """Seconds a tenant's spend, once read, is trusted by this gateway."""
    _seen: dict[str, _Seen] = field(default_factory=dict)

    @property
    def enabled(self) -> bool:
        return self.tokens is not None or self.cost is not None

    async def check(self, store: Store, tenant: str) -> None:
        """Raise 429 when the tenant is over a daily budget."""
        if not self.enabled:
            return
        now = datetime.now(UTC)
        day = now.replace(hour=0, minute=0, second=0, microsecond=0)
        spend = await self._spend(store, tenant, day)
        over = self._over(spend)
        if over is None:
            return
        budget, used, limit = over
        wait = max(1, math.ceil((day + timedelta(days=1) - now).total_seconds()))
        metrics.RATE_LIMITED.labels(budget).inc()
        if budget == "daily_tokens":
            spent = f"{used:,.0f} of {limit:,.0f} tokens"
        else:
            spent = f"${used:,.4f} of ${limit:,.2f}"
        raise Problem(
            429,
            f"this tenant's daily budget is spent ({spent} today, UTC); it renews at midnight "
            f"UTC, in {wait} s",
            headers={"Retry-After": str(wait)},
            type=BUDGET_EXHAUSTED,
            budget=budget,
            used=used,
            limit=limit,
        )

    def _over(self, spend: TenantSpend) -> tuple[Budget, float, float] | None:
        if self.tokens is not None and spend.tokens >= self.tokens:
            return "daily_tokens", float(spend.tokens), float(self.tokens)
        if self.cost is not None and spend.cost >= self.cost:
            return "daily_cost", spend.cost, self.cost
        return None

    async def _spend(self, store: Store, tenant: str, day: datetime) -> TenantSpend:
        seen = self._seen.get(tenant)
        now = time.monotonic()
        if (
            seen is not None
            and seen.day == day
            and (now - seen.read_at < self.fresh_for or self._over(seen.spend) is not None)
        ):
            return seen.spend
        if seen is not None and seen.day != day:
            # A new day: what was read of the others' yesterday is of no use any more.
            self._seen = {t: s for t, s in self._seen.items() if s.day == day}
        spend = await tenant_spend(store.db, tenant, since=day)
        self._seen[tenant] = _Seen(day, spend, now)
        return spend
