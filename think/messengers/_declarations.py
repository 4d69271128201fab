"""Messenger declarations: what `Think.get_messengers()` returns, one per chat platform an
agent answers on. A declaration names its secrets by environment variable (never the secret
itself, so it can sit in code), says how inbound requests are verified (explicitly: a
declaration without a verification posture refuses to load), and how the agent answers.
"""

from __future__ import annotations

import os
import re
from typing import Literal, TypeAlias

from pydantic import BaseModel, ConfigDict, Field, model_validator

from think.exceptions import UserError
from think.messengers._platform import Platform

RespondTo: TypeAlias = Literal["dm", "mention", "subscribed-thread", "action"]
"""What reaches the model: direct messages, messages that mention the bot (a mention also
subscribes its thread), later messages of a subscribed thread, and button presses other than
approvals (approvals are always handled)."""

ConversationScope: TypeAlias = Literal["thread", "self"]
"""`"thread"`: each chat thread is its own conversation of the agent; `"self"`: every thread
feeds the one conversation named after the messenger (answers still go to the asking thread)."""

StreamMode: TypeAlias = Literal["edit", "whole"]
"""`"edit"`: the reply is sent as soon as it has words, then edited at the platform's allowed
rate as it grows; `"whole"`: it is sent once, complete."""

NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,62}$")


class MessengerConfigError(UserError):
    """A messenger declaration that cannot work: no verification posture, a missing secret,
    a bad name. Raised when the worker (or gateway) loads the agent, so it fails to start."""


class Messenger(BaseModel):
    """A chat platform an agent answers on (one webhook: `POST
    /v1/messengers/{agent}/{messenger}/webhook`). Subclassed per platform (`TelegramMessenger`,
    `SlackMessenger`); the fields here are every platform's.

    Verification is explicit: either the platform's secret is named (`TelegramMessenger`'s
    `secret_token_env`, Slack's `signing_secret_env`) or `verify=False` says on purpose that
    anyone may post to the webhook (a local experiment); a declaration with neither fails the
    worker's start."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    platform: str = ""
    """The platform's key (`"telegram"`, `"slack"`): set by the subclass."""
    name: str
    """The messenger's name in the webhook's path and in `TurnRequest.channel`."""
    token_env: str
    """The environment variable holding the bot's API token."""
    verify: bool = True
    """False: accept unverified webhooks (say so on purpose; never in production)."""
    api_url: str
    """The platform's API base URL (tests point it at a local fake)."""
    respond_to: tuple[RespondTo, ...] = ("dm", "mention")
    conversation: ConversationScope = "thread"
    stream: StreamMode = "edit"
    interruption_notice: str = (
        "(My reply was interrupted by a restart. Please ask again if you still need it.)"
    )
    """Posted instead of a second partial reply when delivery resumes after a crash."""
    error_message: str = "Sorry, something went wrong while answering. Please try again."
    """Posted when the turn fails; the details stay in the logs."""
    max_attachment_bytes: int = Field(default=10 * 1024 * 1024, gt=0)
    """Photos and documents larger than this are refused with a note in the thread."""

    @model_validator(mode="after")
    def _named(self) -> Messenger:
        if not NAME.match(self.name):
            raise MessengerConfigError(
                f"messenger name {self.name!r} must be lowercase letters, digits, '-' or '_' "
                "(it is a path segment of the webhook)"
            )
        return self

    def secret_env(self) -> str | None:
        """The variable holding the verification secret; None when `verify=False`."""
        return None

    def client(self) -> Platform:
        """The platform's client for this declaration (see `think.messengers._platform`)."""
        raise NotImplementedError(f"{type(self).__name__} does not name its platform client")

    def check(self) -> None:
        """Raise `MessengerConfigError` unless the declaration can run: a verification posture
        (a secret variable, or `verify=False`), and its variables set. Called at the worker's
        and the gateway's start."""
        if self.verify and self.secret_env() is None:
            raise MessengerConfigError(
                f"messenger {self.name!r} has no verification posture: name the secret's "
                f"variable ({self._secret_field()}=...) or pass verify=False to accept "
                "unverified webhooks on purpose"
            )
        for var in (self.token_env, self.secret_env()):
            if var is not None and not os.environ.get(var):
                raise MessengerConfigError(
                    f"messenger {self.name!r}: the environment variable {var!r} is not set"
                )

    def _secret_field(self) -> str:
        return "secret_env"

    def token(self) -> str:
        """The bot token, read from `token_env` now."""
        return os.environ.get(self.token_env, "")

    def secret(self) -> str | None:
        var = self.secret_env()
        return None if var is None else os.environ.get(var, "")


def check_messengers(agent: str, messengers: list[Messenger]) -> None:
    """Check an agent's declarations as a worker starts: each one runnable (`Messenger.check`)
    and their names unique."""
    seen: set[str] = set()
    for messenger in messengers:
        if not isinstance(messenger, Messenger):
            raise MessengerConfigError(
                f"{agent}.get_messengers() returned {messenger!r}: each must be a Messenger "
                "(TelegramMessenger(...), SlackMessenger(...))"
            )
        if messenger.name in seen:
            raise MessengerConfigError(
                f"{agent}.get_messengers() declares {messenger.name!r} twice: names are unique"
            )
        seen.add(messenger.name)
        messenger.check()
