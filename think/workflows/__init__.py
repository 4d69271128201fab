"""Temporal workflows: deterministic, no I/O, no user code."""

from think.workflows._conversation import ConversationWorkflow
from think.workflows._turn import AfterTurnWorkflow, TurnWorkflow

WORKFLOWS = [ConversationWorkflow, TurnWorkflow, AfterTurnWorkflow]

__all__ = ["WORKFLOWS", "AfterTurnWorkflow", "ConversationWorkflow", "TurnWorkflow"]
