"""The connection guard of the fetch tools: httpx over an httpcore pool whose network backend
resolves each host itself, checks every address it got, and connects to the checked address.

The address checked is the address connected to: there is no second lookup between the check
and the connection, so a DNS answer that changes in between (rebinding) cannot slip a private
address in. TLS still names the URL's host (httpcore's `start_tls` gets the origin's host,
not the address), and so does the `Host` header. Every connection of every redirect hop goes
through the same backend.

`Resolver` and `Connector` are injectable: tests pass a resolver with canned answers and a
connector that fails the test on any connection it does not expect, so a refusal is proved
without a packet leaving the machine even if the checks were broken.
"""

from __future__ import annotations

import asyncio
import functools
import ipaddress
import socket
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from typing import Any

import certifi
import httpcore
import httpx

from think.tools._fetch_url import IPAddress

Resolver = Callable[[str, int], Awaitable[Sequence[str]]]
"""`(host, port) -> addresses`: what a host name resolves to."""
Connector = httpcore.AsyncNetworkBackend
"""What opens the TCP connection to a checked address (httpcore's own backend by default)."""


class AddressRefused(Exception):
    """A connection the guard would not open; the message says why, for the model."""


async def system_resolver(host: str, port: int) -> list[str]:
    """The system's resolver (`getaddrinfo`), answers in its order, without duplicates."""
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    out: list[str] = []
    for info in infos:
        address = str(info[4][0])
        if address not in out:
            out.append(address)
    return out


class GuardedBackend(httpcore.AsyncNetworkBackend):
    """Resolve, check every answer, connect to the checked address. `check` None (a named
    target, internal by design) still pins the connection to the address resolved."""

    def __init__(
        self,
        resolver: Resolver,
        connector: Connector,
        check: Callable[[IPAddress], str | None] | None,
    ) -> None:
        self.resolver = resolver
        self.connector = connector
        self.check = check
        self.connected: list[tuple[str, str, int]] = []
        """(host, address, port) of every connection opened, for the audit."""

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore's interface
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        addresses = await self._addresses(host, port)
        if self.check is not None:
            for address in addresses:
                reason = self.check(address)
                if reason is not None:
                    literal = str(address) == host.strip("[]")
                    raise AddressRefused(reason if literal else f"{host} resolves to {reason}")
        chosen = str(addresses[0])
        self.connected.append((host, chosen, port))
        return await self.connector.connect_tcp(
            chosen, port, timeout=timeout, local_address=local_address, socket_options=None
        )

    async def _addresses(self, host: str, port: int) -> list[IPAddress]:
        literal = host[1:-1] if host.startswith("[") else host
        try:
            return [ipaddress.ip_address(literal)]
        except ValueError:
            pass
        try:
            answers = await self.resolver(host, port)
        except OSError as exc:
            raise httpcore.ConnectError(f"{host} could not be resolved: {exc}") from exc
        addresses: list[IPAddress] = []
        for answer in answers:
            try:
                addresses.append(ipaddress.ip_address(str(answer).split("%", 1)[0]))
            except ValueError:
                raise AddressRefused(f"{host} resolved to {answer!r}, not an address") from None
        if not addresses:
            raise httpcore.ConnectError(f"{host} has no address")
        return addresses

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore's interface
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        raise AddressRefused("unix sockets are never fetched")

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


class _Body(httpx.AsyncByteStream):
    def __init__(self, response: httpcore.Response) -> None:
        self._response = response

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._response.aiter_stream():
            yield chunk

    async def aclose(self) -> None:
        await self._response.aclose()


@functools.cache
def _ssl_context() -> ssl.SSLContext:
    """One per process: loading the CA bundle costs ~18 ms, most of a local fetch."""
    return ssl.create_default_context(cafile=certifi.where())


class GuardedTransport(httpx.AsyncBaseTransport):
    """httpx's transport hook over an httpcore pool on a `GuardedBackend`; no proxy, no
    environment (`HTTP_PROXY` would route around the guard)."""

    def __init__(self, backend: GuardedBackend) -> None:
        self.backend = backend
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=_ssl_context(), network_backend=backend, max_connections=4, retries=0
        )

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        assert isinstance(request.stream, httpx.AsyncByteStream)
        core = httpcore.Request(
            method=request.method,
            url=httpcore.URL(
                scheme=request.url.raw_scheme,
                host=request.url.raw_host,
                port=request.url.port,
                target=request.url.raw_path,
            ),
            headers=request.headers.raw,
            content=request.stream,
            extensions=request.extensions,
        )
        response = await self._pool.handle_async_request(core)
        return httpx.Response(
            status_code=response.status,
            headers=response.headers,
            stream=_Body(response),
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        await self._pool.aclose()
