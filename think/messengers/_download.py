"""Downloading an attachment through the fetch tools' connection guard (`think.tools`): the
address checked is the address connected to, no redirects are followed, no proxy from the
environment is used, and the body is read only up to the size limit."""

from __future__ import annotations

from collections.abc import Mapping

import httpcore
import httpx

from think.tools import GuardedBackend, GuardedTransport, address_refusal, system_resolver

CONNECT_TIMEOUT = 10.0


class DownloadTooLarge(Exception):
    """The body went past the limit (the download was stopped there)."""


async def download(
    url: str, max_bytes: int, *, trusted: bool, headers: Mapping[str, str] | None = None
) -> bytes:
    """The body of `url`, at most `max_bytes` (past it: `DownloadTooLarge`). `trusted`: the
    host is an API endpoint the operator declared (`Messenger.api_url` set explicitly, as a
    fetch tool's named target is), so private and loopback addresses are allowed; otherwise
    they are refused, as for any URL a model could steer. `headers` go with the request (Slack's
    `url_private` wants the bot token)."""
    backend = GuardedBackend(
        system_resolver, httpcore.AnyIOBackend(), None if trusted else address_refusal
    )
    transport = GuardedTransport(backend)
    timeout = httpx.Timeout(60.0, connect=CONNECT_TIMEOUT)
    async with (
        httpx.AsyncClient(transport=transport, timeout=timeout, follow_redirects=False) as client,
        client.stream("GET", url, headers=dict(headers or {})) as response,
    ):
        response.raise_for_status()
        declared = response.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > max_bytes:
            raise DownloadTooLarge(url)
        data = bytearray()
        async for chunk in response.aiter_bytes():
            data += chunk
            if len(data) > max_bytes:
                raise DownloadTooLarge(url)
        return bytes(data)
