"""Temporal over TLS, mutual TLS and with an API key, as Temporal Cloud or a TLS cluster
serves it: a TLS endpoint of the test's own (tests/_tls.py: a CA, server and client
certificates made now, a TLS-terminating proxy with ALPN h2) in front of the session's
Temporal dev server.

A client of the right CA connects and calls; a whole turn runs through a gateway and a worker
that reach Temporal over mTLS (and Postgres over TLS, `sslmode=verify-full`); an API key
arrives as Temporal Cloud reads it (`authorization: Bearer <key>` on every call, read off
the wire by the proxy); a TOML profile selected by TEMPORAL_PROFILE configures all of it.
What cannot work says so in one line naming the setting, from `connect`, `think worker` and
`think api` alike: a wrong CA, a server that needs TLS or a client certificate, an unknown
profile, a certificate path that does not exist, an address nobody answers.
"""

from __future__ import annotations

import secrets
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest

from tests._stack import ROOT, Stack, free_port, own_stack
from tests._tls import Certificates, TlsProxy, postgres_url, tls_proxy
from tests._turn_helpers import helper_path
from think._settings import Settings
from think.dev import Services
from think.exceptions import TemporalConnectionError
from think.testing import FakeOpenAIServer, text
from think.workflows import connect

DESCRIBE = "/temporal.api.workflowservice.v1.WorkflowService/DescribeNamespace"


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return Certificates.create(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="module")
def tls(services: Services, certs: Certificates) -> Iterator[TlsProxy]:
    """TLS in front of the dev server, no client certificate asked."""
    with tls_proxy(services.temporal_address, certs.server) as proxy:
        yield proxy


@pytest.fixture(scope="module")
def mtls(services: Services, certs: Certificates) -> Iterator[TlsProxy]:
    """TLS in front of the dev server, a client certificate of the test CA required."""
    with tls_proxy(services.temporal_address, certs.server, certs.ca.ca_path) as proxy:
        yield proxy


def _settings(**env: str) -> Settings:
    return Settings.from_env(env, find_dev_stack=False)


async def _describe(settings: Settings) -> str:
    client = await connect(settings)
    described = await client.workflow_service.describe_namespace(
        DescribeNamespaceRequest(namespace=client.namespace)
    )
    return described.namespace_info.name


async def test_tls_with_the_right_ca_connects_and_calls(tls: TlsProxy, certs: Certificates) -> None:
    settings = _settings(
        TEMPORAL_ADDRESS=tls.address, TEMPORAL_TLS_SERVER_CA_CERT_PATH=str(certs.ca.ca_path)
    )
    before = len(tls.requests)
    assert await _describe(settings) == "default"
    assert DESCRIBE in [r[":path"] for r in tls.requests[before:]]
    # The certificate names `localhost`: a server name it carries works too.
    named = settings.model_copy(update={"temporal_tls_server_name": "localhost"})
    assert await _describe(named) == "default"


async def test_a_wrong_ca_is_named(tls: TlsProxy, certs: Certificates) -> None:
    stranger = str(certs.stranger.ca_path)
    with pytest.raises(TemporalConnectionError) as raised:
        await connect(
            _settings(TEMPORAL_ADDRESS=tls.address, TEMPORAL_TLS_SERVER_CA_CERT_PATH=stranger)
        )
    assert str(raised.value) == (
        f"TLS handshake with Temporal at {tls.address} failed: its certificate is not signed "
        f"by the CA of TEMPORAL_TLS_SERVER_CA_CERT_PATH={stranger!r}"
    )
    assert raised.value.setting == "TEMPORAL_TLS_SERVER_CA_CERT_PATH"
    # No CA given: the system's roots do not know the test CA either.
    with pytest.raises(TemporalConnectionError, match="not signed by a CA this system trusts"):
        await connect(_settings(TEMPORAL_ADDRESS=tls.address, TEMPORAL_TLS="1"))
    # A server name the certificate does not carry.
    with pytest.raises(TemporalConnectionError) as raised:
        await connect(
            _settings(
                TEMPORAL_ADDRESS=tls.address,
                TEMPORAL_TLS_SERVER_CA_CERT_PATH=str(certs.ca.ca_path),
                TEMPORAL_TLS_SERVER_NAME="temporal.example",
            )
        )
    assert "not valid for 'temporal.example' (it names localhost, 127.0.0.1)" in str(raised.value)
    assert raised.value.setting == "TEMPORAL_TLS_SERVER_NAME"


async def test_plain_and_tls_mixed_up_are_named(tls: TlsProxy, services: Services) -> None:
    with pytest.raises(TemporalConnectionError) as raised:
        await connect(_settings(TEMPORAL_ADDRESS=tls.address))  # TLS server, plain client
    assert str(raised.value).startswith(
        f"Temporal at {tls.address} closed the connection: it may need TLS (TEMPORAL_TLS=1"
    )
    assert raised.value.setting == "TEMPORAL_TLS"
    plain = services.temporal_address
    with pytest.raises(TemporalConnectionError) as raised:
        await connect(_settings(TEMPORAL_ADDRESS=plain, TEMPORAL_API_KEY="k"))
    assert str(raised.value) == (
        f"TLS handshake with Temporal at {plain} failed: the server does not speak TLS "
        "(TEMPORAL_API_KEY turns it on); set TEMPORAL_TLS=0 if it is meant to be plain"
    )


async def test_mtls_needs_the_client_certificate(mtls: TlsProxy, certs: Certificates) -> None:
    ca = {
        "TEMPORAL_ADDRESS": mtls.address,
        "TEMPORAL_TLS_SERVER_CA_CERT_PATH": str(certs.ca.ca_path),
    }
    with pytest.raises(TemporalConnectionError) as raised:
        await connect(_settings(**ca))
    assert str(raised.value) == (
        f"Temporal at {mtls.address} closed the connection after the TLS handshake: it may "
        "require a client certificate (TEMPORAL_TLS_CLIENT_CERT_PATH and "
        "TEMPORAL_TLS_CLIENT_KEY_PATH)"
    )
    cert = {
        "TEMPORAL_TLS_CLIENT_CERT_PATH": str(certs.client.cert),
        "TEMPORAL_TLS_CLIENT_KEY_PATH": str(certs.client.key),
    }
    assert await _describe(_settings(**ca, **cert)) == "default"
    # A key that is not the certificate's.
    wrong_key = {**cert, "TEMPORAL_TLS_CLIENT_KEY_PATH": str(certs.server.key)}
    with pytest.raises(TemporalConnectionError) as raised:
        await connect(_settings(**ca, **wrong_key))
    assert raised.value.setting == "TEMPORAL_TLS_CLIENT_KEY_PATH"
    assert "is not the private key of TEMPORAL_TLS_CLIENT_CERT_PATH=" in str(raised.value)


async def test_an_api_key_travels_as_temporal_cloud_reads_it(
    tls: TlsProxy, certs: Certificates
) -> None:
    key = f"tk-{secrets.token_hex(8)}"
    before = len(tls.requests)
    settings = _settings(
        TEMPORAL_ADDRESS=tls.address,
        TEMPORAL_TLS_SERVER_CA_CERT_PATH=str(certs.ca.ca_path),
        TEMPORAL_API_KEY=key,
    )
    assert await _describe(settings) == "default"
    sent = tls.requests[before:]
    assert DESCRIBE in [r[":path"] for r in sent]
    # Every call of that client, its first (GetSystemInfo) included, carries the key.
    assert sent and all(r.get("authorization") == f"Bearer {key}" for r in sent), sent
    assert all(r.get("temporal-namespace", "default") == "default" for r in sent)


async def test_a_profile_selected_by_temporal_profile(
    tls: TlsProxy, certs: Certificates, tmp_path: Path
) -> None:
    """The TOML file the Temporal CLI shares: the profile gives the address, TLS and the key;
    a variable set beside it overrides its value."""
    path = tmp_path / "temporal.toml"
    path.write_text(
        f"""
[profile.default]
address = "127.0.0.1:{free_port()}"

[profile.cloud]
address = "{tls.address}"
namespace = "default"
api_key = "key-of-the-profile"

[profile.cloud.tls]
server_ca_cert_path = "{certs.ca.ca_path}"
"""
    )
    env = {"TEMPORAL_CONFIG_FILE": str(path), "TEMPORAL_PROFILE": "cloud"}
    before = len(tls.requests)
    assert await _describe(_settings(**env)) == "default"
    assert {r.get("authorization") for r in tls.requests[before:]} == {"Bearer key-of-the-profile"}
    before = len(tls.requests)
    assert await _describe(_settings(**env, TEMPORAL_API_KEY="key-of-the-variable")) == "default"
    assert {r.get("authorization") for r in tls.requests[before:]} == {"Bearer key-of-the-variable"}
    # The same profile with the wrong CA: the message says where the CA came from.
    path.write_text(path.read_text().replace(str(certs.ca.ca_path), str(certs.stranger.ca_path)))
    with pytest.raises(TemporalConnectionError) as raised:
        await connect(_settings(**env))
    assert str(raised.value).endswith(
        f"not signed by the CA of tls.server_ca_cert of profile 'cloud' of {path}"
    )


async def test_a_whole_turn_through_a_gateway_and_worker_on_mtls(
    stack: Stack,
    services: Services,
    mtls: TlsProxy,
    certs: Certificates,
    fake_model: FakeOpenAIServer,
    cid: str,
    tmp_path: Path,
) -> None:
    """The production shape: Temporal over mTLS, Postgres over TLS verifying its server
    (`sslmode=verify-full` in THINK_DATABASE_URL)."""
    socket = str(services.postgres.socket_dir / ".s.PGSQL.5432")
    with tls_proxy(socket, certs.server, postgres=True) as pg_tls:
        env = {
            **stack.env,
            "THINK_TASK_QUEUE": f"mtls-{secrets.token_hex(4)}",
            "THINK_DATABASE_URL": postgres_url(pg_tls, certs.ca.ca_path),
            "TEMPORAL_ADDRESS": mtls.address,
            "TEMPORAL_TLS_SERVER_CA_CERT_PATH": str(certs.ca.ca_path),
            "TEMPORAL_TLS_CLIENT_CERT_PATH": str(certs.client.cert),
            "TEMPORAL_TLS_CLIENT_KEY_PATH": str(certs.client.key),
        }
        before = len(mtls.requests)
        # Repeated: a first step begun beside the start and dropped asks the model again.
        fake_model.script(cid, text("over ", "TLS"), repeat=True)
        with own_stack(env, tmp_path) as own:
            async with httpx.AsyncClient(base_url=own.api_url, timeout=60) as api:
                answer = await api.post(
                    f"{helper_path(cid)}/turns", json={"input": "hello?", "mode": "wait"}
                )
        # The pools of the gateway and the worker, and their LISTEN connections.
        assert pg_tls.handshakes >= 4
    turn = answer.json()
    assert answer.status_code == 200 and turn["status"] == "completed", turn
    assert turn["message"]["parts"][-1]["text"] == "over TLS"
    # The worker polled and completed through the proxy: its calls went over mTLS.
    paths = {r[":path"].rsplit("/", 1)[-1] for r in mtls.requests[before:]}
    assert {"PollWorkflowTaskQueue", "RespondWorkflowTaskCompleted"} <= paths, paths


# -- one line from the commands ----------------------------------------------------------------


def _run(command: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "think", command],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=90,
    )


def test_think_migrate_over_tls_with_an_api_key(
    stack: Stack, tls: TlsProxy, certs: Certificates
) -> None:
    """The CLI reaches Temporal the same way: `think migrate` checks the search attributes
    through the operator API over TLS, with the key on its calls."""
    env = {
        **stack.env,
        "TEMPORAL_ADDRESS": tls.address,
        "TEMPORAL_TLS_SERVER_CA_CERT_PATH": str(certs.ca.ca_path),
        "TEMPORAL_API_KEY": "migrating-key",
    }
    before = len(tls.requests)
    result = _run("migrate", env)
    assert result.returncode == 0, result.stderr
    assert "search attributes: all registered" in result.stdout
    sent = tls.requests[before:]
    listed = [r for r in sent if r[":path"].endswith("/ListSearchAttributes")]
    assert listed and all(r["authorization"] == "Bearer migrating-key" for r in sent)


def test_think_worker_says_what_is_wrong_in_one_line(
    stack: Stack, tls: TlsProxy, certs: Certificates, tmp_path: Path
) -> None:
    base = {
        **stack.env,
        "THINK_TASK_QUEUE": f"failing-{secrets.token_hex(4)}",
        "THINK_AGENTS": "tests.agents:Helper",
    }
    nobody = f"127.0.0.1:{free_port()}"
    profiles = tmp_path / "temporal.toml"
    profiles.write_text(f'[profile.default]\naddress = "{tls.address}"\n')
    cases = [
        (
            {"TEMPORAL_ADDRESS": nobody},
            1,
            f"cannot reach Temporal at {nobody}: connection refused",
        ),
        (
            {
                "TEMPORAL_ADDRESS": tls.address,
                "TEMPORAL_TLS_SERVER_CA_CERT_PATH": str(certs.stranger.ca_path),
            },
            1,
            "its certificate is not signed by the CA of TEMPORAL_TLS_SERVER_CA_CERT_PATH=",
        ),
        (
            {"TEMPORAL_ADDRESS": tls.address, "TEMPORAL_TLS_CLIENT_CERT_PATH": "/no/such.pem"},
            2,
            "TEMPORAL_TLS_CLIENT_CERT_PATH='/no/such.pem': no such file",
        ),
        (
            {"TEMPORAL_CONFIG_FILE": str(profiles), "TEMPORAL_PROFILE": "prod"},
            2,
            f"TEMPORAL_PROFILE='prod': no such profile in {profiles}; it has 'default'",
        ),
    ]
    for changes, status, said in cases:
        env = {**base, **changes}
        if "TEMPORAL_CONFIG_FILE" in changes:
            del env["TEMPORAL_ADDRESS"]
        result = _run("worker", env)
        assert "Traceback" not in result.stderr, result.stderr
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("think worker: error: "), result.stderr
        assert said in lines[0], lines[0]
        assert result.returncode == status, result.stderr


def test_think_api_says_what_is_wrong_in_one_line(
    stack: Stack, mtls: TlsProxy, certs: Certificates
) -> None:
    env = {
        **stack.env,
        "TEMPORAL_ADDRESS": mtls.address,
        "TEMPORAL_TLS_SERVER_CA_CERT_PATH": str(certs.ca.ca_path),
    }
    process = subprocess.run(
        [sys.executable, "-m", "think", "api", "--port", str(free_port())],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert process.returncode != 0
    assert "Traceback" not in process.stderr, process.stderr
    said = [line for line in process.stderr.splitlines() if "think api: " in line]
    assert len(said) == 1, process.stderr
    assert said[0].endswith(
        f"think api: Temporal at {mtls.address} closed the connection after the TLS handshake: "
        "it may require a client certificate (TEMPORAL_TLS_CLIENT_CERT_PATH and "
        "TEMPORAL_TLS_CLIENT_KEY_PATH)"
    ), said
