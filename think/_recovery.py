"""How a turn recovers from a failing model: the retry budget and the terminal message."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

DEFAULT_TERMINAL_MESSAGE = (
    "Sorry, the model stopped responding and this answer was interrupted. Please try again."
)


class ChatRecovery(BaseModel):
    """`max_attempts` counts every attempt of a model step, the first included: a step that
    fails (an error the provider may not repeat, a dropped or stalled stream, a lost worker)
    is retried until then, and the turn then ends as `interrupted` with `terminal_message`
    stored and streamed in place of the failed step."""

    model_config = ConfigDict(frozen=True)

    max_attempts: int = Field(default=3, ge=1, le=50)
    terminal_message: str = Field(default=DEFAULT_TERMINAL_MESSAGE, min_length=1)
