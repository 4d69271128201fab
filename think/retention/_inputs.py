"""The retention workflows' and activities' durable contracts (add optional fields with
defaults; never remove or retype one while a schedule or erasure uses it)."""

from __future__ import annotations

from pydantic import BaseModel


class SweepInput(BaseModel):
    """The schedule's argument: how much one activity attempt deletes before it reports."""

    batch: int = 100
    """Conversations (or turn records) read per query."""


class SweepResult(BaseModel):
    turns: int = 0
    """Turn records deleted (their usage kept)."""
    conversations: int = 0
    """Idle conversations deleted with everything they own."""


class EraseInput(BaseModel):
    tenant: str
    batch: int = 100


class EraseResult(BaseModel):
    conversations: int = 0
    """Conversations deleted with everything they own."""
    workflows_terminated: int = 0
    """The tenant's workflows still running once its conversations were gone (none, mostly:
    deleting a conversation ends its turns first)."""
    workflows_deleted: int = 0
    """Closed workflows of the tenant whose histories and search attributes were deleted."""
