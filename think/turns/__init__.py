"""Turns: admission (idempotency, `message_concurrency`, the queue in Postgres), starting a
turn's workflow (`hand_off`), waiting for and following a turn, cancelling one, and the Python
turn API (`ThinkService`, `ConversationHandle`).

One front door: the gateway (`api/`), `ThinkService` and the worker all admit through
`admit` here. Imported by `engine`, `schedules`, `server` and the apps.
"""

from think.turns._admission import admit, cancel_turn, follow, wait_for_turn
from think.turns._dispatch import DispatchFailed, hand_off, start_turn_workflow
from think.turns._service import ConversationHandle, ThinkService

__all__ = [
    "ConversationHandle",
    "DispatchFailed",
    "ThinkService",
    "admit",
    "cancel_turn",
    "follow",
    "hand_off",
    "start_turn_workflow",
    "wait_for_turn",
]
