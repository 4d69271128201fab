"""Temporal workflows: deterministic, no I/O, no user code."""

from think.workflows._connect import connect, register_search_attributes
from think.workflows._turn import AfterTurnWorkflow, TurnWorkflow

WORKFLOWS = [TurnWorkflow, AfterTurnWorkflow]

__all__ = [
    "WORKFLOWS",
    "AfterTurnWorkflow",
    "TurnWorkflow",
    "connect",
    "register_search_attributes",
]
