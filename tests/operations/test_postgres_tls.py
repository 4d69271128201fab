"""Postgres over TLS from THINK_DATABASE_URL's own `sslmode` (and `sslrootcert`): the URL
reaches libpq unchanged on each of Think's paths to Postgres, the migrations (SQLAlchemy's
psycopg dialect), the pool of gateways and workers, and the LISTEN connection, so a managed
Postgres that requires TLS, verifying its certificate, needs nothing but the URL.

The session's embedded Postgres listens on a Unix socket only; a TLS endpoint of the test's
own (tests/_tls.py, speaking Postgres's `SSLRequest`) stands in front of it on 127.0.0.1 with
a certificate of a CA made now.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import psycopg
import pytest

from tests._tls import Certificates, TlsProxy, postgres_url, tls_proxy
from think._settings import Settings
from think.dev import Services
from think.storage import migrate, open_database
from think.streaming import ChunkListener


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return Certificates.create(tmp_path_factory.mktemp("pg-certs"))


@pytest.fixture(scope="module")
def pg_tls(services: Services, certs: Certificates) -> Iterator[TlsProxy]:
    socket = services.postgres.socket_dir / ".s.PGSQL.5432"
    with tls_proxy(str(socket), certs.server, postgres=True) as proxy:
        yield proxy


async def test_sslmode_in_the_url_reaches_every_connection(
    pg_tls: TlsProxy, certs: Certificates, services: Services
) -> None:
    settings = services.settings(Settings()).model_copy(
        update={"database_url": postgres_url(pg_tls, certs.ca.ca_path)}
    )
    before = pg_tls.handshakes
    await migrate(settings)  # SQLAlchemy's dialect: already at head, but connected over TLS
    assert pg_tls.handshakes > before
    db = await open_database(settings, max_size=2)
    try:
        async with db.connection() as conn:
            assert conn.pgconn.ssl_in_use
            row = await (await conn.execute("SELECT current_database() AS db")).fetchone()
            assert row == {"db": "think"}
    finally:
        await db.close()
    listener = ChunkListener(settings.libpq_url)
    handshakes = pg_tls.handshakes
    await listener.start()
    try:
        deadline = asyncio.get_running_loop().time() + 20
        while not listener.connected:
            assert asyncio.get_running_loop().time() < deadline, "the listener did not connect"
            await asyncio.sleep(0.05)
        assert pg_tls.handshakes > handshakes
    finally:
        await listener.stop()


async def test_a_certificate_it_cannot_verify_is_refused(
    pg_tls: TlsProxy, certs: Certificates
) -> None:
    """`verify-full` with the wrong CA: libpq refuses the server, as it would a server in the
    middle (and so does `require` once `sslrootcert` is given: libpq then verifies the CA);
    `require` alone encrypts without verifying."""
    for sslmode in ("verify-full", "require"):
        with pytest.raises(psycopg.OperationalError, match="certificate verify failed"):
            await psycopg.AsyncConnection.connect(
                postgres_url(pg_tls, certs.stranger.ca_path, sslmode)
            )
    unverified = f"postgresql://postgres@{pg_tls.address}/think?sslmode=require"
    async with await psycopg.AsyncConnection.connect(unverified) as conn:
        assert conn.pgconn.ssl_in_use
