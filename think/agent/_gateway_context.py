"""The context of `Think.get_gateway`: the turn a model is resolved for."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

TurnTrigger = Literal["submission", "regenerate", "continuation", "sub-agent"]


class GatewayContext(BaseModel):
    """The active turn at a model resolution (each step, and each model of a fallback chain)."""

    model_config = ConfigDict(frozen=True)

    tenant: str
    agent: str
    conversation_id: str
    turn_id: str
    step: int
    trigger: TurnTrigger
    """What started the turn: a submission (schedules' prompts included), a regenerate, a
    continuation of the last answer, or a parent agent's tool call (a sub-agent's turn)."""
