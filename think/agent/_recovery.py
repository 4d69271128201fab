"""How a turn recovers when a model step is lost: the budgets, the terminal message, what
`on_chat_recovery` and `on_exhausted` are shown, and what the first may answer."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

DEFAULT_TERMINAL_MESSAGE = (
    "Sorry, the model stopped responding and this answer was interrupted. Please try again."
)

RecoveryKind = Literal["model_error", "stall", "crash"]
"""What lost the step: the model failed (an error it may not repeat, a dropped stream), its
stream stalled past `chat_stream_stall_timeout`, or the attempt running it never finished (its
worker died: a crash, an eviction, a deploy; or Postgres went away under it)."""


class ChatRecovery(BaseModel):
    """`max_attempts` bounds how often the model may fail one step (an error the provider may
    not repeat, a dropped or stalled stream), the first attempt included: the step is retried
    until then, and the turn then ends as `interrupted` with `terminal_message` stored and
    streamed in place of the failed step. Attempts lost to a dead worker or a Postgres or
    Temporal outage do not count against it (they say nothing about the model), but every
    recovery counts against `max_no_progress`: a turn whose recoveries, that many in a row,
    each find it no further on than the one before (nothing new streamed or settled between
    them: a step that kills its worker before its first word, over and over) ends the same
    way instead of looping."""

    model_config = ConfigDict(frozen=True)

    max_attempts: int = Field(default=3, ge=1, le=50)
    terminal_message: str = Field(default=DEFAULT_TERMINAL_MESSAGE, min_length=1)
    max_no_progress: int = Field(default=3, ge=1, le=50)
    """Recoveries in a row that may find the turn no further on than the previous one did;
    the next one gives up (`on_exhausted`, then `terminal_message`)."""


class ChatRecoveryContext(BaseModel):
    """What `on_chat_recovery` (and `on_exhausted`) is shown when a model step was lost and
    the turn recovers: why (`kind`), which incident and how often, what the lost attempt had
    streamed (`partial`) and what the turn stashed (`data`)."""

    model_config = ConfigDict(frozen=True)

    agent: str
    conversation_id: str
    turn_id: str
    step: int
    kind: RecoveryKind = "model_error"
    incident_id: str = ""
    """Stable across the recoveries of one incident: a recovery that finds the turn further on
    than the one before it did (something new streamed or settled) begins a new one."""
    attempt: int = 1
    """This incident's recoveries so far, this one included."""
    created_at: datetime | None = None
    """When the turn started (when it was accepted, if it never started)."""
    failures: int = 0
    """How often the model has failed this step so far, this failure included (0 for a
    crash: a dead worker says nothing about the model)."""
    max_attempts: int = 3
    cause: str = ""
    partial_text: str = ""
    """The text the lost attempt streamed before it was lost (empty if none)."""
    partial: list[dict[str, Any]] = Field(default_factory=list)
    """Everything the lost attempt streamed of its step, as UI message parts (text, reasoning,
    tool calls as far as they got, steering messages it delivered): what the default keeps."""
    data: Any = None
    """The latest value the turn gave `self.stash(value)` (None if it never stashed)."""


class ChatRecoveryOptions(BaseModel):
    """`continue_=False` ends the turn as `interrupted` now (keeping the partial output when
    `persist` allows). `persist=True` keeps the lost attempt's partial output in the answer
    as a finished step and asks the model to carry on from it in a new step; `persist=False`
    drops it and asks again from scratch. None (unset) is the kind's default: keep it after a
    `crash` (the spec's default: the words were paid for and shown), drop it after a
    `model_error` or `stall` (a failing model's last words are often cut mid-sentence by the
    failure). A partial with nothing in it is never kept; settled tool results, in earlier
    steps, are never dropped."""

    model_config = ConfigDict(frozen=True, populate_by_name=True)

    continue_: bool = Field(default=True, alias="continue")
    persist: bool | None = None

    def keeps(self, kind: RecoveryKind) -> bool:
        """Whether the partial output is kept, for a recovery of `kind`."""
        return self.persist if self.persist is not None else kind == "crash"
