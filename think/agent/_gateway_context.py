"""The context of `Think.get_gateway`: the turn a model is resolved for, and what for."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict

from think.models import Gateway
from think.tools import maybe_await

if TYPE_CHECKING:
    from think.agent._think import Think

TurnTrigger = Literal["submission", "regenerate", "continuation", "sub-agent", "manual"]

ModelPurpose = Literal["step", "compaction"]


class GatewayContext(BaseModel):
    """The active turn at a model resolution (each step, each model of a fallback chain, and
    each summarising request of a compaction)."""

    model_config = ConfigDict(frozen=True)

    tenant: str
    agent: str
    conversation_id: str
    turn_id: str
    """Empty for a compaction the application asked for (`ConversationHandle.compact()`)."""
    step: int
    """The step being answered; for a compaction after a turn, the number of steps it took."""
    trigger: TurnTrigger
    """What started the turn: a submission (schedules' prompts included), a regenerate, a
    continuation of the last answer, or a parent agent's tool call (a sub-agent's turn);
    `manual` for a compaction the application asked for, outside any turn."""
    purpose: ModelPurpose = "step"
    """What the model is asked for: a turn's step, or a compaction's summary (which a gateway
    may send to a cheaper endpoint)."""


async def ask_gateway(agent: Think, model: str, ctx: GatewayContext) -> Gateway | None:
    """The agent's `get_gateway` answer for `model` (awaited when it is async); `TypeError`
    when it answers neither a `Gateway` nor None."""
    found = await maybe_await(agent.get_gateway(model, ctx))
    if found is not None and not isinstance(found, Gateway):
        raise TypeError(f"get_gateway returned {found!r}, neither a Gateway nor None")
    return found
