"""Outbound webhooks: an agent (`Think.webhooks`) or the deployment (`THINK_WEBHOOK_URLS`)
names URLs that receive a signed POST when a turn completes, errors, or pauses for a person.

    class Support(Think):
        webhooks = [Webhook(url="https://crm.example.com/think", secret_env="CRM_SECRET")]

Each event is delivered by a workflow of its own (`think.WebhookDelivery`, started once per
event and URL), at least once, with Temporal's retries and backoff; docs/webhooks.md has the
body, the headers and how to verify a signature.
"""

from think.webhooks._declaration import (
    WEBHOOK_EVENTS,
    Webhook,
    WebhookError,
    WebhookEvent,
    check_secrets,
    checked_webhooks,
)
from think.webhooks._payload import (
    EVENT_HEADER,
    EVENT_ID_HEADER,
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
    PausedCall,
    WebhookPayload,
    event_id,
    event_of,
    payload_of,
    signature,
    signed_body,
    verify_signature,
)
from think.webhooks._send import Answer, Refused, post

__all__ = [
    "EVENT_HEADER",
    "EVENT_ID_HEADER",
    "SIGNATURE_HEADER",
    "TIMESTAMP_HEADER",
    "WEBHOOK_EVENTS",
    "Answer",
    "PausedCall",
    "Refused",
    "Webhook",
    "WebhookError",
    "WebhookEvent",
    "WebhookPayload",
    "check_secrets",
    "checked_webhooks",
    "event_id",
    "event_of",
    "payload_of",
    "post",
    "signature",
    "signed_body",
    "verify_signature",
]
