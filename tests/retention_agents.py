"""Agents with their own retention (`turn_retention_days`, `conversation_retention_days`), for
tests/retention: one that keeps everything whatever the deployment says, one that keeps its
turn records a shorter time than the deployment."""

from __future__ import annotations

import math

from tests.agents import Helper


class KeptForever(Helper):
    name = "kept_forever"
    turn_retention_days = math.inf
    conversation_retention_days = math.inf


class ShortLived(Helper):
    name = "short_lived"
    turn_retention_days = 1
