"""Temporal workflows: deterministic, no I/O, no user code."""

from think.workflows._connect import connect, connect_config, register_search_attributes
from think.workflows._turn import (
    AfterTurnWorkflow,
    ParkedActionWorkflow,
    RunTurnWorkflow,
    TurnWorkflow,
)

WORKFLOWS = [TurnWorkflow, AfterTurnWorkflow, RunTurnWorkflow, ParkedActionWorkflow]

__all__ = [
    "WORKFLOWS",
    "AfterTurnWorkflow",
    "ParkedActionWorkflow",
    "RunTurnWorkflow",
    "TurnWorkflow",
    "connect",
    "connect_config",
    "register_search_attributes",
]
