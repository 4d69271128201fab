"""A turn's budgets (`turn_budget_tokens`, `turn_budget_seconds`, or what `before_turn` set):
checked between model steps, and the time budget also cuts a step short."""

from __future__ import annotations

from datetime import UTC, datetime

from think.agent import StoredTurnConfig, Think, stored_or
from think.engine.activities._observe import Which
from think.storage import TurnRecord


def budget_spent(agent: Think, turn: TurnRecord) -> tuple[Which, float, float] | None:
    """Which budget forbids another model step, with what was used of it, if one does (the
    agent's, or what `before_turn` set for this turn)."""
    config = StoredTurnConfig.read(turn.config)
    max_tokens = stored_or(config.turn_budget_tokens, agent.turn_budget_tokens)
    max_seconds = stored_or(config.turn_budget_seconds, agent.turn_budget_seconds)
    tokens = turn.usage.get("input_tokens", 0) + turn.usage.get("output_tokens", 0)
    if max_tokens is not None and tokens >= max_tokens:
        return "tokens", tokens, max_tokens
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


def budget_message(which: Which, used: float, limit: float) -> str:
    if which == "tokens":
        return f"token budget spent: {used:g} of {limit:g} tokens used"
    return f"time budget spent: {used:.1f} of {limit:g} s"
