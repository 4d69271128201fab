"""A TLS endpoint in front of the Temporal dev server, as a Temporal Cloud namespace or a TLS
cluster would present one, made in the test process: certificates from `cryptography`, and
a TLS-terminating TCP proxy (asyncio and `ssl`, ALPN `h2`) that may require a client
certificate (mTLS).

With `postgres=True` it speaks Postgres's way into TLS instead (`SSLRequest`, then the
handshake), in front of the embedded Postgres's Unix socket, for URLs with `sslmode`.

The proxy also reads the gRPC requests passing through it (HTTP/2 HEADERS frames, decoded
with `hpack`, the HPACK codec of the Python HTTP/2 stack) without changing a byte, so a test
sees the metadata a client really sent, such as the `authorization` header an API key
becomes. Nothing is mocked: the client and the dev server speak to each other as they would
without it.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import ipaddress
import ssl
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

import hpack
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
SSL_REQUEST, GSS_ENC_REQUEST = 80877103, 80877104
HEADERS, CONTINUATION = 0x1, 0x9
END_HEADERS, PADDED, PRIORITY = 0x4, 0x8, 0x20


@dataclass(frozen=True)
class Pem:
    """A certificate and its key, written as PEM files."""

    cert: Path
    key: Path


@dataclass(frozen=True)
class Authority:
    """A certificate authority that signs a server's or a client's certificate."""

    name: str
    key: ec.EllipticCurvePrivateKey
    cert: x509.Certificate
    folder: Path

    @classmethod
    def create(cls, folder: Path, name: str) -> Authority:
        key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        cert = (
            _builder(subject, subject, key.public_key())
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    key_cert_sign=True,
                    crl_sign=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .sign(key, hashes.SHA256())
        )
        folder.mkdir(parents=True, exist_ok=True)
        authority = cls(name, key, cert, folder)
        authority.ca_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        return authority

    @property
    def ca_path(self) -> Path:
        return self.folder / f"{self.name}-ca.pem"

    def issue(self, name: str, *, server: bool) -> Pem:
        """A certificate for `name`: a server's (for `localhost` and 127.0.0.1) or a
        client's."""
        key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        usage = ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH
        builder = _builder(subject, self.cert.subject, key.public_key()).add_extension(
            x509.ExtendedKeyUsage([usage]), critical=False
        )
        if server:
            names: list[x509.GeneralName] = [
                x509.DNSName(name),
                x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
            ]
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
        cert = builder.sign(self.key, hashes.SHA256())
        pem = Pem(self.folder / f"{name}.pem", self.folder / f"{name}-key.pem")
        pem.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        pem.key.write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )
        return pem


def _builder(
    subject: x509.Name, issuer: x509.Name, public_key: ec.EllipticCurvePublicKey
) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=1))
    )


@dataclass
class Certificates:
    """What a TLS test needs: a CA with a server and a client certificate, and a CA that
    signed neither (the wrong one to trust)."""

    ca: Authority
    server: Pem
    client: Pem
    stranger: Authority

    @classmethod
    def create(cls, folder: Path) -> Certificates:
        ca = Authority.create(folder, "think-test")
        return cls(
            ca=ca,
            server=ca.issue("localhost", server=True),
            client=ca.issue("think-worker", server=False),
            stranger=Authority.create(folder, "stranger"),
        )


@dataclass
class TlsProxy:
    """TLS on 127.0.0.1 (ALPN h2) in front of `upstream` (`host:port`, plain gRPC), or plain
    TCP when `server` is None; with `client_ca`, a client must present a certificate that CA
    signed (mTLS). `requests` holds the headers of every gRPC request that went through, in
    order. While `gate` is clear, a connection is held (accepted, not forwarded) until it is
    set: a client that waits for its server."""

    upstream: str
    server: Pem | None
    client_ca: Path | None = None
    postgres: bool = False
    """Postgres's own way to TLS instead: a plain TCP connection asks for it (`SSLRequest`),
    is answered `S`, then shakes hands; `upstream` is then the server's Unix socket."""
    handshakes: int = 0
    requests: list[dict[str, str]] = field(default_factory=list)
    gate: threading.Event = field(default_factory=threading.Event)
    port: int = 0
    _loop: asyncio.AbstractEventLoop | None = None
    _thread: threading.Thread | None = None
    _stop: asyncio.Event | None = None
    _connections: set[asyncio.Task[None]] = field(default_factory=set)
    _writers: set[asyncio.StreamWriter] = field(default_factory=set)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _context(self) -> ssl.SSLContext | None:
        if self.server is None:
            return None
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(self.server.cert, self.server.key)
        context.set_alpn_protocols(["postgresql" if self.postgres else "h2"])
        if self.client_ca is not None:
            context.verify_mode = ssl.CERT_REQUIRED
            context.load_verify_locations(self.client_ca)
        return context

    def __enter__(self) -> TlsProxy:
        started = threading.Event()
        loop = asyncio.new_event_loop()

        async def main() -> None:
            self._stop = asyncio.Event()
            context = None if self.postgres else self._context()
            server = await asyncio.start_server(
                self._serve,
                "127.0.0.1",
                0,
                ssl=context,
                ssl_handshake_timeout=10 if context else None,
            )
            self.port = server.sockets[0].getsockname()[1]
            started.set()
            try:
                await self._stop.wait()
            finally:
                # Closed, not cancelled: asyncio's stream callback would log a cancelled
                # connection's task as an error.
                server.close()
                for writer in self._writers:
                    writer.close()
                if self._connections:
                    await asyncio.wait(self._connections, timeout=5)

        def run() -> None:
            loop.run_until_complete(main())

        self._loop = loop
        self._thread = threading.Thread(target=run, name="tls-proxy", daemon=True)
        self._thread.start()
        if not started.wait(10):
            raise RuntimeError("the TLS proxy did not start")
        return self

    def __exit__(self, *exc_info: object) -> None:
        loop, thread, stop = self._loop, self._thread, self._stop
        if loop is None or thread is None or stop is None:
            return
        self.gate.set()
        loop.call_soon_threadsafe(stop.set)
        thread.join(10)
        loop.close()

    async def _serve(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        self._writers.add(client_w)
        try:
            # A thread's event, set from the test's thread: polled, as no loop owns it.
            while not self.gate.is_set():  # noqa: ASYNC110
                await asyncio.sleep(0.02)
            if self._stop is None or self._stop.is_set():
                return
            if self.postgres and not await self._postgres_tls(client_r, client_w):
                return
            if self.server is not None:
                self.handshakes += 1
            try:
                if self.upstream.startswith("/"):
                    server_r, server_w = await asyncio.open_unix_connection(self.upstream)
                else:
                    host, port = self.upstream.rsplit(":", 1)
                    server_r, server_w = await asyncio.open_connection(host, int(port))
            except OSError:
                return
            self._writers.add(server_w)
            observe = None if self.postgres else _HeaderReader(self.requests).feed
            try:
                await asyncio.gather(
                    _pipe(client_r, server_w, observe), _pipe(server_r, client_w, None)
                )
            finally:
                server_w.close()
                self._writers.discard(server_w)
        finally:
            client_w.close()
            self._writers.discard(client_w)
            self._connections.discard(task)

    async def _postgres_tls(
        self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter
    ) -> bool:
        """Answer the client's requests for encryption as Postgres does: GSSAPI `N`, TLS
        `S` and the handshake. A client that asks for neither is refused (False)."""
        while True:
            try:
                request = await client_r.readexactly(8)
            except (asyncio.IncompleteReadError, ConnectionError):
                return False
            code = int.from_bytes(request[4:], "big")
            if code == GSS_ENC_REQUEST:
                client_w.write(b"N")
                await client_w.drain()
                continue
            if code != SSL_REQUEST:
                return False
            client_w.write(b"S")
            await client_w.drain()
            context = self._context()
            assert context is not None
            try:
                await client_w.start_tls(context, ssl_handshake_timeout=10)
            except (ssl.SSLError, ConnectionError, TimeoutError):
                return False
            return True


async def _pipe(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    observe: Callable[[bytes], None] | None,
) -> None:
    try:
        while data := await reader.read(65536):
            if observe is not None:
                observe(data)
            writer.write(data)
            await writer.drain()
    except (ConnectionError, ssl.SSLError):
        pass
    finally:
        with contextlib.suppress(Exception):
            writer.write_eof()


class _HeaderReader:
    """Reads the HTTP/2 frames a client sends and decodes the header blocks (the decoder
    keeps HPACK's table across them, as the server's does)."""

    def __init__(self, into: list[dict[str, str]]) -> None:
        self._into = into
        self._buffer = b""
        self._preface = False
        self._decoder = hpack.Decoder()
        self._block = b""

    def feed(self, data: bytes) -> None:
        self._buffer += data
        if not self._preface:
            if len(self._buffer) < len(PREFACE):
                return
            self._buffer = self._buffer.removeprefix(PREFACE)
            self._preface = True
        while len(self._buffer) >= 9:
            length = int.from_bytes(self._buffer[:3], "big")
            kind, flags = self._buffer[3], self._buffer[4]
            if len(self._buffer) < 9 + length:
                return
            payload, self._buffer = self._buffer[9 : 9 + length], self._buffer[9 + length :]
            if kind == HEADERS:
                self._block = self._fragment(payload, flags)
            elif kind == CONTINUATION:
                self._block += payload
            else:
                continue
            if flags & END_HEADERS:
                headers = self._decoder.decode(self._block, raw=False)
                self._into.append({str(k): str(v) for k, v in headers})
                self._block = b""

    @staticmethod
    def _fragment(payload: bytes, flags: int) -> bytes:
        start, pad = 0, 0
        if flags & PADDED:
            pad = payload[0]
            start = 1
        if flags & PRIORITY:
            start += 5
        end = len(payload) - pad
        return payload[start:end]


@contextlib.contextmanager
def tls_proxy(
    upstream: str,
    server: Pem | None,
    client_ca: Path | None = None,
    *,
    gated: bool = False,
    postgres: bool = False,
) -> Iterator[TlsProxy]:
    """A proxy as `TlsProxy` says, open (forwarding) unless `gated`."""
    proxy = TlsProxy(upstream, server, client_ca, postgres=postgres)
    if not gated:
        proxy.gate.set()
    with proxy:
        yield proxy


def postgres_url(proxy: TlsProxy, ca: Path, sslmode: str = "verify-full") -> str:
    """THINK_DATABASE_URL for the session's database through a `postgres` proxy: TLS,
    verifying the server's certificate against `ca`."""
    return (
        f"postgresql://postgres@{proxy.address}/think"
        f"?sslmode={sslmode}&sslrootcert={quote(str(ca), safe='/')}"
    )
