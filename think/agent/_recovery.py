"""How a turn recovers from a failing model: the retry budget and the terminal message."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

DEFAULT_TERMINAL_MESSAGE = (
    "Sorry, the model stopped responding and this answer was interrupted. Please try again."
)


class ChatRecovery(BaseModel):
    """`max_attempts` bounds how often the model may fail one step (an error the provider may
    not repeat, a dropped or stalled stream), the first attempt included: the step is retried
    until then, and the turn then ends as `interrupted` with `terminal_message` stored and
    streamed in place of the failed step. Attempts lost to a dead worker or a Postgres or
    Temporal outage are retried too but do not count: they say nothing about the model."""

    model_config = ConfigDict(frozen=True)

    max_attempts: int = Field(default=3, ge=1, le=50)
    terminal_message: str = Field(default=DEFAULT_TERMINAL_MESSAGE, min_length=1)


class ChatRecoveryContext(BaseModel):
    """What `on_chat_recovery` is shown when a model step fails and could be retried."""

    model_config = ConfigDict(frozen=True)

    agent: str
    conversation_id: str
    turn_id: str
    step: int
    failures: int
    """How often the model has failed this step so far, this failure included."""
    max_attempts: int
    cause: str
    partial_text: str
    """The text the failed attempt streamed before it failed (empty if none)."""


class ChatRecoveryOptions(BaseModel):
    """`continue_=False` ends the turn as `interrupted` now. `persist=True` keeps the failed
    attempt's partial output in the answer and asks the model to carry on from it in a new step,
    instead of discarding it and asking again from scratch (the default)."""

    model_config = ConfigDict(frozen=True, populate_by_name=True)

    continue_: bool = Field(default=True, alias="continue")
    persist: bool = False
