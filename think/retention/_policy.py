"""How long each agent's records are kept: its own `turn_retention_days` /
`conversation_retention_days` over the deployment's `THINK_TURN_RETENTION_DAYS` /
`THINK_CONVERSATION_RETENTION_DAYS`; `math.inf` or nothing set: forever."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from think._settings import Settings
    from think.agent import Think


def retention_days(agent: type[Think], settings: Settings) -> tuple[float | None, float | None]:
    """The agent's (turn records, idle conversations) retention in days; None: kept forever."""

    def pick(own: float | None, deployment: float | None) -> float | None:
        days = own if own is not None else deployment
        return None if days is None or math.isinf(days) else days

    return (
        pick(agent.turn_retention_days, settings.turn_retention_days),
        pick(agent.conversation_retention_days, settings.conversation_retention_days),
    )


def retention_configured(settings: Settings, agents: Iterable[type[Think]]) -> bool:
    """Whether any hosted agent keeps something for a bounded time."""
    return any(any(d is not None for d in retention_days(a, settings)) for a in agents)
