"""Messenger turns: a chat platform's webhook admitted as a turn, and its reply delivered.

Above the turn API (`think.turns`: admission, decisions) and below the engine, which hosts
the delivery activity. The declarations and the platform seam are `think.messengers`'s;
docs/messengers.md has the walk and the delivery guarantees.
"""

from think.messenger_turns._buttons import approver_name
from think.messenger_turns._delivery import DeliveryActivities
from think.messenger_turns._hub import MessengerHub, check_registry
from think.messenger_turns._ingest import WebhookAnswer, conversation_id, receive

__all__ = [
    "DeliveryActivities",
    "MessengerHub",
    "WebhookAnswer",
    "approver_name",
    "check_registry",
    "conversation_id",
    "receive",
]
