"""Agents of tests/turns/test_fairness.py: one with a priority of its own."""

from __future__ import annotations

from tests.agents import Helper


class Urgent(Helper):
    """Helper's twin whose turns go first on a busy task queue."""

    name = "urgent"
    priority = 1
