"""The deployment's outbound webhooks, declared here and named in `Settings`: URLs that
receive every agent's turn events (beside each agent's own `Think.webhooks`), their secret,
the private hosts a webhook may reach, and how deliveries are retried (think.webhooks)."""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import BeforeValidator, Field
from pydantic_settings import NoDecode

_URL = re.compile(r"https?://[^\s/?#]+[^\s]*")
_HOST = re.compile(r"[A-Za-z0-9._:\-\[\]]+")


def _urls(value: Any) -> Any:
    if not isinstance(value, str):
        return value
    urls = [u.strip() for u in value.split(",") if u.strip()]
    for url in urls:
        if not _URL.fullmatch(url):
            raise ValueError(f"entry {url!r} is not an http:// or https:// URL")
    return urls


def _hosts(value: Any) -> Any:
    if not isinstance(value, str):
        return value
    hosts = [h.strip().lower() for h in value.split(",") if h.strip()]
    for host in hosts:
        if not _HOST.fullmatch(host):
            raise ValueError(f"entry {host!r} is not a host name or an address (no scheme)")
    return [h[1:-1] if h.startswith("[") else h for h in hosts]


def _one_word(value: Any) -> Any:
    if isinstance(value, str) and not re.fullmatch(r"\S+", value):
        raise ValueError("expected one word, without spaces")
    return value


Urls = Annotated[list[str], NoDecode, BeforeValidator(_urls)]
Hosts = Annotated[list[str], NoDecode, BeforeValidator(_hosts)]
Secret = Annotated[str | None, BeforeValidator(_one_word)]

WEBHOOK_URLS: Any = Field(
    default_factory=list,
    validation_alias="THINK_WEBHOOK_URLS",
    description="comma-separated URLs that receive every agent's turn events "
    "(`turn.completed`, `turn.error`, `turn.paused`) as signed POSTs, beside each agent's "
    "own `Think.webhooks` (docs/webhooks.md); needs THINK_WEBHOOK_SECRET",
    examples=["https://hooks.example.com/think"],
)

WEBHOOK_SECRET: Any = Field(
    default=None,
    validation_alias="THINK_WEBHOOK_SECRET",
    repr=False,
    description="the HMAC-SHA256 secret that signs the POSTs to THINK_WEBHOOK_URLS "
    "(`x-think-signature`)",
    examples=["whsec-3f9a0c"],
)

WEBHOOK_PRIVATE_HOSTS: Any = Field(
    default_factory=list,
    validation_alias="THINK_WEBHOOK_PRIVATE_HOSTS",
    description="comma-separated hosts (names or addresses) whose private or loopback "
    "addresses webhooks may reach; every other webhook URL must be public (the fetch tools' "
    "SSRF guard)",
    examples=["hooks.internal,10.0.0.7"],
)

WEBHOOK_RETRY_SECONDS: Any = Field(
    default=2.0,
    gt=0,
    validation_alias="THINK_WEBHOOK_RETRY_SECONDS",
    description="the first wait before a failed webhook delivery is tried again; each "
    "next wait doubles, up to 10 minutes",
    examples=["5"],
)

WEBHOOK_GIVE_UP_SECONDS: Any = Field(
    default=86400.0,
    gt=0,
    validation_alias="THINK_WEBHOOK_GIVE_UP_SECONDS",
    description="how long a webhook delivery is retried (5xx, 408, 429, timeouts, refused "
    "connections) before it is given up and logged",
    examples=["3600"],
)

WEBHOOK_TIMEOUT_SECONDS: Any = Field(
    default=10.0,
    gt=0,
    validation_alias="THINK_WEBHOOK_TIMEOUT_SECONDS",
    description="how long one webhook attempt waits for the receiver's answer",
    examples=["5"],
)
