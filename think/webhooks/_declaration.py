"""`Webhook`: one URL an agent's turn events are POSTed to, and the checks a worker runs on
the declarations before it starts."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, field_validator

from think.exceptions import UserError
from think.tools import DisallowedURL, parse_url

WebhookEvent = Literal["turn.completed", "turn.error", "turn.paused"]
WEBHOOK_EVENTS: tuple[str, ...] = get_args(WebhookEvent)
"""`turn.completed`: the turn answered; `turn.error`: it ended `error` or `interrupted`;
`turn.paused`: it waits for a person's approval or a client tool's result."""


def _every_event() -> list[WebhookEvent]:
    return ["turn.completed", "turn.error", "turn.paused"]


class WebhookError(UserError):
    """A webhook declaration or setting that cannot work; the worker does not start."""


class Webhook(BaseModel):
    """POST the agent's turn `events` to `url`, signed with the secret held by the
    environment variable `secret_env` (docs/webhooks.md).

        class Support(Think):
            webhooks = [Webhook(url="https://crm.example.com/think", secret_env="CRM_SECRET")]
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    url: str
    events: list[WebhookEvent] = Field(default_factory=_every_event, min_length=1)
    secret_env: str = Field(min_length=1)
    """The environment variable that holds the HMAC secret (never the secret itself)."""

    @field_validator("url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        try:
            parse_url(value)
        except DisallowedURL as exc:
            raise ValueError(str(exc)) from None
        return value.strip()


def checked_webhooks(owner: str, declared: object) -> list[Webhook]:
    """`declared` (an agent's `webhooks`) as a list of `Webhook`, or a `WebhookError` that
    names the agent and what is wrong."""
    if not isinstance(declared, Sequence) or isinstance(declared, str | bytes):
        raise WebhookError(f"{owner}.webhooks={declared!r} must be a list of Webhook(...)")
    hooks: list[Webhook] = []
    for hook in declared:
        if not isinstance(hook, Webhook):
            raise WebhookError(f"{owner}.webhooks holds {hook!r}, not a Webhook(...)")
        hooks.append(hook)
    return hooks


def check_secrets(owner: str, hooks: Sequence[Webhook], env: Mapping[str, str]) -> None:
    """Every webhook's secret is set in `env`: a delivery that could not be signed would be
    retried in vain, so a worker without one does not start."""
    for hook in hooks:
        if not env.get(hook.secret_env, "").strip():
            raise WebhookError(
                f"{owner}: the webhook to {hook.url} signs with ${hook.secret_env}, which is "
                "not set in the worker's environment: set it (any long random string, shared "
                "with the receiver)"
            )
