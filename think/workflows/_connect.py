"""The one place that knows how we talk to Temporal, shared by the gateway, workers and CLI.

Both sides must agree on the data converter and on names; building the client here (and nowhere
else) makes a disagreement impossible. The connection itself (address, namespace, TLS, mTLS,
API key) is Temporal's own environment configuration (`temporalio.envconfig`): the settings
hold its variables and the selected TOML profile (`think/_settings/_temporal.py` says which
wins), and `connect_config` turns them into `Client.connect`'s arguments with Temporal's own
`ClientConfigProfile.to_client_connect_config`, so an API key becomes the
`authorization: Bearer` metadata and turns TLS on exactly as every Temporal SDK does.

What goes wrong is said in one line naming the setting to change (`TemporalConnectionError`,
or `ConfigurationError` for a file that cannot be used), never as the transport's error.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import (
    AddSearchAttributesRequest,
    ListSearchAttributesRequest,
)
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.envconfig import ClientConfigProfile, ClientConfigTLS, ClientConnectConfig
from temporalio.service import RPCError, RPCStatusCode

from think._settings import Settings, temporal_profile_origin
from think.exceptions import ConfigurationError, TemporalConnectionError
from think.workflows._otel import tracing_interceptors
from think.workflows.names import SEARCH_ATTRIBUTES

CA_VAR = "TEMPORAL_TLS_SERVER_CA_CERT_PATH"
CERT_VAR = "TEMPORAL_TLS_CLIENT_CERT_PATH"
KEY_VAR = "TEMPORAL_TLS_CLIENT_KEY_PATH"
NAME_VAR = "TEMPORAL_TLS_SERVER_NAME"
_PRESENTED = re.compile(r"presented: \[(.*?)\]")
_NAME = re.compile(r"\((?:\\?\")?([^()\\\"]+)(?:\\?\")?\)")
_REFUSED = re.compile(r'code: (Unauthenticated|PermissionDenied), message: "(.*?)"')


async def connect(settings: Settings) -> Client:
    """A client of the deployment's Temporal; `TemporalConnectionError` if it cannot be had."""
    config = connect_config(settings)
    try:
        return await Client.connect(
            **config,
            data_converter=pydantic_data_converter,
            # OpenTelemetry spans from the API through workflows to activities, when
            # OTEL_EXPORTER_OTLP_ENDPOINT is set; workers built on this client inherit it.
            interceptors=tracing_interceptors(),
            # The client's first call (`GetSystemInfo`) says at once whether the address, TLS
            # and credentials work.
            lazy=False,
        )
    except RuntimeError as error:  # the bridge's "Failed client connect: ..." and RPCError
        raise _explained(error, settings, config) from error


def connect_config(settings: Settings) -> ClientConnectConfig:
    """`Client.connect`'s connection arguments (address, namespace, API key, TLS, gRPC
    metadata) from the settings: the profile's values under the variables'.

    Raises `ConfigurationError` for a TLS file that is gone or is not PEM."""
    # A plain dict in `Settings` (pydantic holds no TypedDict of temporalio's), the same shape.
    base = ClientConfigProfile.from_dict(settings.temporal_profile_values)  # type: ignore[arg-type]
    tls = base.tls or ClientConfigTLS()
    tls = dataclasses.replace(
        tls,
        disabled=tls.disabled if settings.temporal_tls is None else not settings.temporal_tls,
        server_name=settings.temporal_tls_server_name or tls.server_name,
        server_root_ca_cert=settings.temporal_tls_server_ca_cert_path or tls.server_root_ca_cert,
        client_cert=settings.temporal_tls_client_cert_path or tls.client_cert,
        client_private_key=settings.temporal_tls_client_key_path or tls.client_private_key,
    )
    profile = ClientConfigProfile(
        address=settings.require_temporal_address(),
        namespace=settings.temporal_namespace,
        api_key=settings.temporal_api_key or base.api_key,
        # Any TLS setting at all turns TLS on (Temporal's rule); none leaves the choice to the
        # API key (on) or the default (off).
        tls=None if tls == ClientConfigTLS() else tls,
        grpc_meta=base.grpc_meta,
    )
    _check_pem(settings, profile.tls)
    return profile.to_client_connect_config()


def _check_pem(settings: Settings, tls: ClientConfigTLS | None) -> None:
    """Read each TLS file now, to name a bad one by its setting: the transport would say
    only `UnknownIssuer` for a CA file holding no certificate."""
    if tls is None or tls.disabled:
        return
    for source, marker, what in (
        (tls.server_root_ca_cert, b"-----BEGIN CERTIFICATE-----", "a PEM certificate"),
        (tls.client_cert, b"-----BEGIN CERTIFICATE-----", "a PEM certificate"),
        (tls.client_private_key, b"PRIVATE KEY-----", "a PEM private key"),
    ):
        if source is None:
            continue
        name = _setting(settings, source)
        try:
            data = source.read_bytes() if isinstance(source, Path) else source
        except OSError as error:
            raise ConfigurationError(f"{name}: cannot be read: {error.strerror}") from None
        if marker not in (data.encode() if isinstance(data, str) else data):
            raise ConfigurationError(f"{name}: not {what} (no {marker.decode()!r} in it)")


def _setting(settings: Settings, source: object) -> str:
    """How a message names a TLS source: its variable with the value, or its profile."""
    for var, value in (
        (CA_VAR, settings.temporal_tls_server_ca_cert_path),
        (CERT_VAR, settings.temporal_tls_client_cert_path),
        (KEY_VAR, settings.temporal_tls_client_key_path),
    ):
        if value is not None and value == source:
            return f"{var}={str(value)!r}"
    origin = temporal_profile_origin(settings.temporal_profile, settings.temporal_config_file)
    shown = f" {str(source)!r}" if isinstance(source, Path) else ""
    return f"the TLS file{shown} of {origin}"


def _named(settings: Settings, var: str, value: object, profile_key: str) -> str:
    """`VAR='value'` when the variable gave it, else where in the profile it came from."""
    if value is not None:
        return f"{var}={str(value)!r}"
    origin = temporal_profile_origin(settings.temporal_profile, settings.temporal_config_file)
    return f"{profile_key} of {origin}"


def _explained(
    error: RuntimeError, settings: Settings, config: ClientConnectConfig
) -> TemporalConnectionError:
    """One line for what Temporal's client (tonic and rustls, beneath) says, naming the
    setting to look at. The transport's words are kept at the end for what is not known."""
    address = config["target_host"]
    tls = config.get("tls", False)
    tls_config = tls if not isinstance(tls, bool) else None
    has_key = "api_key" in config
    has_cert = tls_config is not None and tls_config.client_cert is not None
    raw = " ".join(str(error).split())
    at = f"Temporal at {address}"
    ca = _named(settings, CA_VAR, settings.temporal_tls_server_ca_cert_path, "tls.server_ca_cert")
    cert = _named(settings, CERT_VAR, settings.temporal_tls_client_cert_path, "tls.client_cert")
    key = _named(settings, KEY_VAR, settings.temporal_tls_client_key_path, "tls.client_key")
    setting: str | None
    refused = _REFUSED.search(raw)
    if refused or (
        isinstance(error, RPCError)
        and error.status in (RPCStatusCode.UNAUTHENTICATED, RPCStatusCode.PERMISSION_DENIED)
    ):
        setting = "TEMPORAL_API_KEY" if has_key else CERT_VAR
        what = "API key (TEMPORAL_API_KEY)" if has_key else "credentials"
        said = refused.group(2) if refused else str(error)
        message = f"{at} refused the {what}: {said or 'no reason given'}"
    elif "ConnectionRefused" in raw or "tcp connect error" in raw:
        setting = "TEMPORAL_ADDRESS"
        message = f"cannot reach {at}: connection refused (is TEMPORAL_ADDRESS right, and is "
        message += "the server up?)"
    elif "dns error" in raw:
        setting = "TEMPORAL_ADDRESS"
        message = f"cannot reach {at}: its host name does not resolve (TEMPORAL_ADDRESS)"
    elif "UnknownIssuer" in raw or "BadSignature" in raw:
        setting = CA_VAR
        trusted = (
            f"the CA of {ca}"
            if tls_config is not None and tls_config.server_root_ca_cert is not None
            else f"a CA this system trusts (set {CA_VAR} to the CA that signed it)"
        )
        message = f"TLS handshake with {at} failed: its certificate is not signed by {trusted}"
    elif "NotValidForName" in raw:
        setting = NAME_VAR
        shown = _PRESENTED.search(raw)
        names = ", ".join(_NAME.findall(shown.group(1))) if shown else "other names"
        name = tls_config.domain if tls_config is not None and tls_config.domain else None
        message = (
            f"TLS handshake with {at} failed: its certificate is not valid for "
            f"{name or 'that host'!r} (it names {names}); set {NAME_VAR} to one of them"
        )
    elif "InvalidContentType" in raw or "CorruptMessage" in raw or "InvalidMessage" in raw:
        setting = "TEMPORAL_TLS"
        why = " (TEMPORAL_API_KEY turns it on)" if has_key and settings.temporal_tls is None else ""
        message = (
            f"TLS handshake with {at} failed: the server does not speak TLS{why}; "
            "set TEMPORAL_TLS=0 if it is meant to be plain"
        )
    elif "KeyMismatch" in raw or "InconsistentKeys" in raw:
        setting = KEY_VAR
        message = f"{key} is not the private key of {cert}"
    elif "PrivateKeyParseError" in raw or "private key" in raw.lower():
        setting = KEY_VAR
        message = f"{key}: not a private key the TLS library can read (PEM: PKCS#8, RSA or EC)"
    elif "after connection" in raw and not tls:
        setting = "TEMPORAL_TLS"
        message = (
            f"{at} closed the connection: it may need TLS (TEMPORAL_TLS=1; Temporal Cloud: "
            "TEMPORAL_API_KEY, or a client certificate)"
        )
    elif "after connection" in raw and not has_cert:
        setting = CERT_VAR
        message = (
            f"{at} closed the connection after the TLS handshake: it may require a client "
            f"certificate ({CERT_VAR} and {KEY_VAR})"
        )
    elif "after connection" in raw:
        setting = CERT_VAR
        message = (
            f"{at} closed the connection after the TLS handshake: it may not accept the "
            f"client certificate {cert} (not signed by a CA it trusts?)"
        )
    else:
        setting = None
        message = f"cannot connect to {at}: {raw}"
    return TemporalConnectionError(message, address=address, setting=setting)


async def register_search_attributes(client: Client, namespace: str) -> list[str]:
    """Add the Think search attributes that are missing; returns the names it added."""
    existing = await client.operator_service.list_search_attributes(
        ListSearchAttributesRequest(namespace=namespace)
    )
    missing = [
        name
        for name in SEARCH_ATTRIBUTES
        if name not in existing.custom_attributes and name not in existing.system_attributes
    ]
    if missing:
        await client.operator_service.add_search_attributes(
            AddSearchAttributesRequest(
                namespace=namespace,
                search_attributes={
                    name: IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD for name in missing
                },
            )
        )
    return missing
