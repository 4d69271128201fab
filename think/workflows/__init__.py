"""Temporal workflows: deterministic, no I/O, no user code."""

from think.workflows._conversation import ConversationWorkflow
from think.workflows._turn import TurnWorkflow

WORKFLOWS = [ConversationWorkflow, TurnWorkflow]

__all__ = ["WORKFLOWS", "ConversationWorkflow", "TurnWorkflow"]
