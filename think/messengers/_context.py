"""`get_messenger_context()`: where the turn being served came from, for hooks and tools. A
messenger turn carries its origin in its request (`TurnRequest.messenger_context`), so any
activity of the turn, on any worker, after any restart, reads the same."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from think._current import bound_turn_record
from think.messengers._platform import Author, ChatKind, ThreadRef

CAPABILITIES = ("edit", "buttons", "attachments", "markdown")


class MessengerContext(BaseModel):
    """The chat a messenger turn answers: which messenger, thread and author, and what the
    platform can do there (`"edit"`: a reply can stream by edits; `"buttons"`: approvals as
    buttons; `"attachments"`: files reach the model; `"markdown"`: formatting shows)."""

    model_config = ConfigDict(frozen=True)

    messenger: str
    platform: str
    thread: ThreadRef
    author: Author
    chat_kind: ChatKind = "private"
    capabilities: tuple[str, ...] = CAPABILITIES


async def get_messenger_context() -> MessengerContext | None:
    """The messenger context of the turn being served (in a hook or tool on a worker); None
    outside a turn or for a turn that did not come from a messenger."""
    turn = await bound_turn_record()
    if turn is None or turn.request.messenger_context is None:
        return None
    return MessengerContext.model_validate(turn.request.messenger_context)
