"""What the store refuses, as `UserError`s that name the offending value (`api/errors.py` maps
each to its HTTP status). Kept apart from `_store.py` so the tree operations (`_tree.py`) can
raise them too."""

from __future__ import annotations

from think.exceptions import UserError
from think.storage._turn_ids import public_turn_id


class IdempotencyConflict(UserError):
    """The idempotency key was used before with a different request."""

    def __init__(self, key: str, turn_id: str) -> None:
        turn_id = public_turn_id(turn_id)
        super().__init__(
            f"Idempotency-Key {key!r} was already used for a different request (turn {turn_id!r})"
        )
        self.key = key
        self.turn_id = turn_id


class MessageIdConflict(UserError):
    """An input message reuses an id; the tree is append-only, so ids are never rewritten.

    `field` names where the id came from in the request (`input.id` for a turn,
    `messages.2.id` for POST …/messages)."""

    def __init__(self, message_id: str, reason: str, *, field: str = "input.id") -> None:
        super().__init__(f"input message id {message_id!r} {reason}")
        self.message_id = message_id
        self.field = field


class ParentNotFound(UserError):
    def __init__(self, parent_id: str) -> None:
        super().__init__(f"parent_id {parent_id!r} is not a message of this conversation")
        self.parent_id = parent_id


class MessageNotFound(UserError):
    """A message id that is not in the conversation; `field` names the request's field."""

    def __init__(self, message_id: str, *, field: str = "message_id") -> None:
        super().__init__(f"{field} {message_id!r} is not a message of this conversation")
        self.message_id = message_id
        self.field = field


class NotRegenerable(UserError):
    """Only an assistant message that answers something can be regenerated."""

    def __init__(self, message_id: str, reason: str) -> None:
        super().__init__(f"message {message_id!r} cannot be regenerated: {reason}")
        self.message_id = message_id


class TurnNotRecorded(UserError):
    """A turn's first step found no row for it: its workflow, started as its admission
    committed, overtook that commit, or the commit failed (`think.turns._admission`)."""

    def __init__(self, turn_id: str) -> None:
        super().__init__(f"turn {turn_id!r} is not recorded (its admission has not committed)")
        self.turn_id = turn_id
