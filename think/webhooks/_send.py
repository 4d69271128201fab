"""One webhook attempt: a POST through the fetch tools' connection guard, so that a webhook
URL cannot reach a private, loopback or metadata address unless the deployment lists its host
(`THINK_WEBHOOK_PRIVATE_HOSTS`), and the address checked is the address connected to."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

import httpcore
import httpx

from think.tools import (
    AddressRefused,
    DisallowedURL,
    GuardedBackend,
    GuardedTransport,
    address_refusal,
    host_refusal,
    parse_url,
    system_resolver,
)

RETRIED_4XX = frozenset({408, 429})
"""The 4xx answers that mean "later", not "never"."""


class Refused(Exception):
    """The URL may not be reached at all (the guard's reason): retrying cannot help."""


@dataclass(frozen=True)
class Answer:
    status: int
    retry_after: float | None = None
    """Seconds, from a 429 or 503's `Retry-After`."""

    @property
    def delivered(self) -> bool:
        return 200 <= self.status < 300

    @property
    def permanent(self) -> bool:
        """A refusal a retry would meet again: a 4xx other than 408/429, or a redirect (not
        followed: a receiver names its final URL)."""
        return (300 <= self.status < 500) and self.status not in RETRIED_4XX


async def post(
    url: str,
    body: bytes,
    headers: Mapping[str, str],
    *,
    private_hosts: Collection[str],
    timeout: float,  # noqa: ASYNC109 - httpx's own timeout, per phase of the request
) -> Answer:
    """POST `body` once. Raises `Refused` for a URL the guard refuses, and httpx's errors
    (connection refused, timeout) as they come: the caller retries those."""
    try:
        target = parse_url(url)
    except DisallowedURL as exc:
        raise Refused(str(exc)) from None
    listed = target.host in private_hosts
    if not listed and (reason := host_refusal(target)):
        raise Refused(f"{reason} (list the host in THINK_WEBHOOK_PRIVATE_HOSTS to allow it)")
    backend = GuardedBackend(
        system_resolver, httpcore.AnyIOBackend(), None if listed else address_refusal
    )
    try:
        async with httpx.AsyncClient(
            transport=GuardedTransport(backend),
            follow_redirects=False,
            trust_env=False,
            timeout=timeout,
        ) as client:
            answer = await client.post(url, content=body, headers=dict(headers))
    except AddressRefused as exc:
        raise Refused(str(exc)) from None
    return Answer(answer.status_code, _retry_after(answer.headers.get("retry-after")))


def _retry_after(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max((when - datetime.now(UTC)).total_seconds(), 0.0)
