"""How long an agent's records are kept: its own `turn_retention_days` /
`conversation_retention_days` over the deployment's settings, `math.inf` for forever, and a
declaration that cannot mean anything refused when the class is made."""

from __future__ import annotations

import math

import pytest

from tests.agents import Helper
from tests.retention_agents import KeptForever, ShortLived
from think._settings import Settings
from think.exceptions import UserError
from think.retention import retention_configured, retention_days


def test_an_agents_own_retention_wins_over_the_deployments() -> None:
    deployment = Settings(turn_retention_days=30, conversation_retention_days=90)
    assert retention_days(Helper, deployment) == (30, 90)
    assert retention_days(ShortLived, deployment) == (1, 90)
    assert retention_days(KeptForever, deployment) == (None, None)  # math.inf: forever


def test_nothing_configured_keeps_everything_and_arms_no_sweep() -> None:
    assert retention_days(Helper, Settings()) == (None, None)
    assert not retention_configured(Settings(), [Helper, KeptForever])
    assert retention_configured(Settings(), [Helper, ShortLived])
    assert retention_configured(Settings(conversation_retention_days=365), [Helper])


@pytest.mark.parametrize("days", [0, -1, True, "30", math.nan])
def test_a_retention_that_means_nothing_is_refused(days: object) -> None:
    with pytest.raises(UserError, match="turn_retention_days"):
        type("Bad", (Helper,), {"turn_retention_days": days})
