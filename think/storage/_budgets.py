"""Per-tenant daily budgets: `THINK_TENANT_DAILY_TOKENS` and `THINK_TENANT_DAILY_COST`, checked
before new work is admitted, wherever it comes from (a submission to the gateway, a scheduled
prompt).

A budget is over what the tenant's turns created this UTC day spent, as their records keep it
(`think.storage.tenant_spend`: the same steps `GET /v1/usage` sums), so it holds across every
process of a deployment and survives restarts; nothing is counted twice on the turn's path.
Turns already admitted run on: a budget stops new work, it does not cut answers short (that is
`turn_budget_*`'s).

The spend is read again at most every `fresh_for` (a second) per tenant and process (one
indexed query), so a burst of submissions costs Postgres one read; a tenant may overshoot by
what its turns spend in that moment, as it may by what its running turns spend anyway. Once
over, it stays over until midnight, so that answer is kept without reading again.

Steps of models without a known price count nothing towards the cost budget (their tokens
count towards the token one): give such endpoints `prices` (docs/models.md).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import ClassVar, Literal

from think._settings import Settings
from think.storage._store import Store
from think.storage._usage import TenantSpend, tenant_spend

Budget = Literal["daily_tokens", "daily_cost"]


@dataclass(frozen=True)
class Overspent:
    """A tenant over one of its daily budgets."""

    budget: Budget
    used: float
    limit: float
    renews_in: int
    """Seconds until the next UTC midnight, when both budgets renew."""

    @property
    def spent(self) -> str:
        """How far, in words: `12,000 of 10,000 tokens`, `$1.2000 of $1.00`."""
        if self.budget == "daily_tokens":
            return f"{self.used:,.0f} of {self.limit:,.0f} tokens"
        return f"${self.used:,.4f} of ${self.limit:,.2f}"


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
    """Seconds a tenant's spend, once read, is trusted by this process."""
    _seen: dict[str, _Seen] = field(default_factory=dict)

    @classmethod
    def of(cls, settings: Settings) -> DailyBudgets:
        return cls(tokens=settings.tenant_daily_tokens, cost=settings.tenant_daily_cost)

    @property
    def enabled(self) -> bool:
        return self.tokens is not None or self.cost is not None

    async def over(self, store: Store, tenant: str) -> Overspent | None:
        """Which budget the tenant is over, if any (nothing is read when none is set)."""
        if not self.enabled:
            return None
        now = datetime.now(UTC)
        day = now.replace(hour=0, minute=0, second=0, microsecond=0)
        spend = await self._spend(store, tenant, day)
        over = self._over(spend)
        if over is None:
            return None
        budget, used, limit = over
        renews_in = max(1, math.ceil((day + timedelta(days=1) - now).total_seconds()))
        return Overspent(budget, used, limit, renews_in)

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
