"""What a worker checks in its agents' declarations before it connects to anything, so that
a declaration that cannot work stops it with one line (exit 2) instead of failing turns."""

from __future__ import annotations

from collections.abc import Mapping

from think._settings import Settings
from think.agent import AgentRegistry, declared_channels
from think.webhooks import WebhookError, check_secrets, checked_webhooks


def check_agents(registry: AgentRegistry, settings: Settings, env: Mapping[str, str]) -> None:
    """Every agent's channels (`configure_channels`: no name twice, no unknown tool) and
    webhooks (each secret set in `env`, the worker's environment); and the deployment's
    webhooks have their secret. Raises `ChannelError` or `WebhookError`."""
    if settings.webhook_urls and not settings.webhook_secret:
        raise WebhookError(
            "THINK_WEBHOOK_URLS is set but THINK_WEBHOOK_SECRET is not: its POSTs could not "
            "be signed; set it (any long random string, shared with the receivers)"
        )
    for cls in registry:
        declared_channels(cls())
        check_secrets(cls.__name__, checked_webhooks(cls.__name__, cls.webhooks), env)
