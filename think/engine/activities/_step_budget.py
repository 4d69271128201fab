"""A turn's budgets (`turn_budget_tokens`, `turn_budget_seconds`, `turn_budget_cost`, or what
`before_turn` set): checked between model steps, and the time budget also cuts a step short. A
budget in money needs a price: a step of a model without one is refused before it asks
(`unpriced_budget`), since the budget could not stop the turn."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime

from think.agent import StoredTurnConfig, Think, stored_or
from think.engine.activities._observe import Which
from think.exceptions import ModelError
from think.models import ModelClient, ModelEvent, Usage, chain_of, cost_of
from think.storage import TurnRecord, TurnUsage

_PRICE_PROBE = Usage(input_tokens=1_000, output_tokens=1_000)


def budget_spent(agent: Think, turn: TurnRecord) -> tuple[Which, float, float] | None:
    """Which budget forbids another model step, with what was used of it, if one does (the
    agent's, or what `before_turn` set for this turn)."""
    config = StoredTurnConfig.read(turn.config)
    max_tokens = stored_or(config.turn_budget_tokens, agent.turn_budget_tokens)
    max_seconds = stored_or(config.turn_budget_seconds, agent.turn_budget_seconds)
    tokens = turn.usage.get("input_tokens", 0) + turn.usage.get("output_tokens", 0)
    if max_tokens is not None and tokens >= max_tokens:
        return "tokens", tokens, max_tokens
    max_cost = stored_or(config.turn_budget_cost, agent.turn_budget_cost)
    if max_cost is not None:
        # None: a step of a model without a price, which `unpriced_budget` let through only
        # for a turn that had no budget in money then.
        cost = TurnUsage.from_record(turn.usage).cost
        if cost is not None and cost >= max_cost:
            return "cost", cost, max_cost
    if max_seconds is not None and turn.started_at is not None:
        elapsed = (datetime.now(UTC) - turn.started_at).total_seconds()
        if elapsed >= max_seconds:
            return "seconds", elapsed, max_seconds
    return None


def elapsed(turn: TurnRecord) -> float:
    started = turn.started_at or datetime.now(UTC)
    return (datetime.now(UTC) - started).total_seconds()


def time_left(turn: TurnRecord, budget: float | None) -> float | None:
    """Seconds left of the turn's time budget (None: no budget); at least a moment, so a step
    that starts just in time is not refused before it sends anything."""
    if budget is None:
        return None
    return max(budget - elapsed(turn), 0.05)


def unpriced_budget(budget: float | None, model: ModelClient) -> ModelError | None:
    """The error that refuses a step whose turn has a budget in money (`budget`) when its
    model has no known price: the turn could spend without bound. None when there is no such
    budget, or the model is priced."""
    unpriced = [m for m in chain_of(model) if cost_of(m, _PRICE_PROBE) is None]
    if budget is None or not unpriced:
        return None
    return ModelError(
        f"turn_budget_cost is set, but model {unpriced[0].name} has no known price, so the budget "
        "cannot be kept: give its endpoint `prices` (or `price_provider`) in "
        "THINK_MODEL_ENDPOINTS (docs/models.md)",
        retryable=False,
        kind="refused",
    )


async def refused_stream(error: ModelError) -> AsyncIterator[ModelEvent]:
    """A model stream that fails at once with `error`, as a request the adapter refuses to
    send does (so the step ends as any such failure does)."""
    raise error
    yield  # pragma: no cover  (makes this a generator)


def budget_message(which: Which, used: float, limit: float) -> str:
    if which == "tokens":
        return f"token budget spent: {used:g} of {limit:g} tokens used"
    if which == "cost":
        return f"cost budget spent: ${used:g} of ${limit:g} used"
    return f"time budget spent: {used:.1f} of {limit:g} s"
