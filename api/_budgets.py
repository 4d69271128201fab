"""Per-tenant daily budgets at the gateway: past `THINK_TENANT_DAILY_TOKENS` or
`THINK_TENANT_DAILY_COST` (`think.storage.DailyBudgets`, which scheduled prompts are checked
against too), a submission answers 429 with the problem type `/problems/budget-exhausted`, the
budget it is over, and `Retry-After` until the next UTC midnight.
"""

from __future__ import annotations

from api.errors import Problem
from think.server import DailyBudgets, Store, metrics

BUDGET_EXHAUSTED = "/problems/budget-exhausted"
"""The problem type of a refusal by a daily budget (relative to the gateway's URL, where
`GET /problems/budget-exhausted` says what it means)."""

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


async def check_budgets(budgets: DailyBudgets, store: Store, tenant: str) -> None:
    """Raise 429 when the tenant is over a daily budget."""
    over = await budgets.over(store, tenant)
    if over is None:
        return
    metrics.RATE_LIMITED.labels(over.budget).inc()
    raise Problem(
        429,
        f"this tenant's daily budget is spent ({over.spent} today, UTC); it renews at midnight "
        f"UTC, in {over.renews_in} s",
        headers={"Retry-After": str(over.renews_in)},
        type=BUDGET_EXHAUSTED,
        budget=over.budget,
        used=over.used,
        limit=over.limit,
    )
