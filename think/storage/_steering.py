"""Steering a running turn: a user's message sent to it while it runs joins its answer at the
next step boundary (the AI SDK's `steering-message`), instead of waiting behind it as a new
turn or cancelling it.

The messages are kept on the turn's row (`turns.steering`, in the order they came). Delivery is
read off the answer itself: a steering message is delivered once the stored answer holds its
`steering-message` part, which the step that delivers it writes with the rest of the step, so a
retried step delivers it again and never twice. A steer races the turn's end under the turn's
row lock: the transaction that ends a turn locks it and, finding a message not yet delivered,
takes another step for it instead; a steer that comes after finds the turn ended (409).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from psycopg.types.json import Jsonb

from think._messages import UIMessage, new_id
from think.exceptions import UserError
from think.storage._db import Conn, fetch_one
from think.storage._records import Conversation, SteeringMessage, TurnRecord
from think.storage._turn_deletes import TurnNotFound
from think.storage._turn_ids import turn_id_candidates

if TYPE_CHECKING:
    from think._protocol import SteeringMessageChunk
    from think.storage._store import Store


class TurnNotSteerable(UserError):
    """The turn has ended: there is no next step to join. Submit a new turn instead."""

    def __init__(self, turn_id: str, status: str) -> None:
        super().__init__(
            f"turn {turn_id!r} is {status}: a steering message joins a running turn at its "
            "next step; submit it as a new turn instead"
        )
        self.turn_id = turn_id
        self.status = status


_STEER = """
    UPDATE turns SET steering = steering || %(add)s
    WHERE id = ANY(%(ids)s) AND conversation_uid = %(c)s AND completed_at IS NULL
    RETURNING id
"""

_STATUS = "SELECT status FROM turns WHERE id = ANY(%(ids)s) AND conversation_uid = %(c)s"


def steering_of(messages: Sequence[UIMessage]) -> list[SteeringMessage]:
    """Users' messages as steering messages, each with an id of its own."""
    return [SteeringMessage(id=new_id("steer"), parts=[dict(p) for p in m.parts]) for m in messages]


async def add_steering(
    conn: Conn, conversation_uid: str, turn_ids: list[str], sent: Sequence[SteeringMessage]
) -> bool:
    """Add `sent` to the steering of the conversation's turn (one of `turn_ids`, the ids a
    client's name may stand for) unless it has ended: False then, or when there is none."""
    added = Jsonb([s.model_dump(mode="json") for s in sent])
    row = await fetch_one(conn, _STEER, {"add": added, "ids": turn_ids, "c": conversation_uid})
    return row is not None


async def steer_turn(
    store: Store, conversation: Conversation, turn_id: str, messages: Sequence[UIMessage]
) -> list[SteeringMessage]:
    """Send `messages` (users' messages) to the turn `turn_id` names (as a client named it),
    each to join its answer at its next step boundary. Returns them as recorded, with their
    ids. Raises `TurnNotFound`, or `TurnNotSteerable` when the turn has ended."""
    sent = steering_of(messages)
    ids = turn_id_candidates(conversation.tenant, turn_id)
    async with store.db.connection() as conn:
        if await add_steering(conn, conversation.uid, ids, sent):
            return sent
        ended = await fetch_one(conn, _STATUS, {"ids": ids, "c": conversation.uid})
    if ended is None:
        raise TurnNotFound(turn_id)
    raise TurnNotSteerable(turn_id, ended["status"])


def delivered_ids(message: Mapping[str, object] | None) -> set[str]:
    """The steering messages an answer holds (its `steering-message` parts)."""
    parts = message.get("parts") if message else None
    if not isinstance(parts, list):
        return set()
    return {
        str(p.get("id"))
        for p in parts
        if isinstance(p, dict) and p.get("type") == "steering-message"
    }


def pending_steering(
    turn: TurnRecord, message: Mapping[str, object] | None
) -> list[SteeringMessage]:
    """The turn's steering messages that `message` (its answer as it stands) does not hold yet,
    in the order they came: what its next step delivers."""
    if not turn.steering:
        return []
    held = delivered_ids(message)
    return [s for s in turn.steering if s.id not in held]


def steering_chunk(steer: SteeringMessage) -> SteeringMessageChunk:
    """The stream's `steering-message` chunk for `steer` (the stored part has its fields)."""
    return {"type": "steering-message", "id": steer.id, "parts": steer.parts}
