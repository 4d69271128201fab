"""The Temporal connection's variables, declared as every other (`Settings` holds them), and
the TOML profile they may select.

They are the variables of Temporal's own environment configuration (`temporalio.envconfig`,
which the Temporal CLI and every Temporal SDK share), so a deployment configured for the
Temporal CLI is configured for Think. Which value wins, from the strongest:

1. a TEMPORAL_* variable (or the same field given to `Settings(...)` in code);
2. the profile TEMPORAL_PROFILE names (else `default`) in the TOML file TEMPORAL_CONFIG_FILE
   names (else Temporal's default location, `~/.config/temporalio/temporal.toml` on Linux):
   read only when one of the two is set, so that a Temporal CLI profile on a developer's
   machine never redirects `think dev`;
3. for the address alone, a running `think dev`'s dev server (`.think/endpoints.json`);
4. the defaults: namespace `default`, plain TCP.

TLS is on when TEMPORAL_TLS says so, or when any TLS file, a server name or an API key is
given (Temporal's own rule); `TEMPORAL_TLS=0` turns it off whatever else says.
`think.workflows.connect` turns the result into the client's connection.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import AfterValidator, Field

from think.exceptions import ConfigurationError

if TYPE_CHECKING:
    from think._settings._declaration import Settings

_HOST_PORT = re.compile(r"[^\s/]+:\d{1,5}")
_NAMESPACE = re.compile(r"[\w.-]+")
_ONE_WORD = re.compile(r"\S+")
_HOST_NAME = re.compile(r"[A-Za-z0-9_.-]+")
DEFAULT_CONFIG_FILE = "~/.config/temporalio/temporal.toml"
"""Where Temporal looks for profiles when TEMPORAL_CONFIG_FILE is unset (on Linux; macOS
and Windows have their own configuration folders), for messages."""


def _host_port(value: str) -> str:
    if not _HOST_PORT.fullmatch(value):
        raise ValueError("expected host:port, such as temporal:7233")
    return value


def _namespace(value: str) -> str:
    if not _NAMESPACE.fullmatch(value):
        raise ValueError("expected a namespace name: letters, digits, '.', '-' and '_'")
    return value


def _one_word(value: str) -> str:
    if not _ONE_WORD.fullmatch(value):
        raise ValueError("expected one word, without spaces")
    return value


def _host_name(value: str) -> str:
    if not _HOST_NAME.fullmatch(value):
        raise ValueError("expected a host name, such as temporal.internal.example")
    return value


def _readable_file(value: Path) -> Path:
    """A file named by a variable is checked when the variable is read, so a wrong path stops
    the process at once, naming the variable, rather than at its first connection."""
    where = "" if value.is_absolute() else f" (relative to {Path.cwd()})"
    if not value.exists():
        raise ValueError(f"no such file{where}")
    if not value.is_file():
        raise ValueError(f"not a file{where}")
    if not os.access(value, os.R_OK):
        raise ValueError("the file cannot be read (permissions)")
    return value


HostPort = Annotated[str, AfterValidator(_host_port)]
Namespace = Annotated[str, AfterValidator(_namespace)]
OneWord = Annotated[str, AfterValidator(_one_word)]
HostName = Annotated[str, AfterValidator(_host_name)]
ReadableFile = Annotated[Path, AfterValidator(_readable_file)]

ADDRESS: Any = Field(
    default=None,
    validation_alias="TEMPORAL_ADDRESS",
    description="the Temporal frontend, `host:port`; unset: the profile's (TEMPORAL_PROFILE), "
    "else that of a running `think dev`",
    examples=["temporal:7233"],
)
NAMESPACE: Any = Field(
    default="default",
    validation_alias="TEMPORAL_NAMESPACE",
    description="the Temporal namespace; unset: the profile's, else `default`",
    examples=["think-prod"],
)
API_KEY: Any = Field(
    default=None,
    validation_alias="TEMPORAL_API_KEY",
    repr=False,
    description="an API key (Temporal Cloud), sent as `authorization: Bearer <key>` on every "
    "call; it turns TLS on",
    examples=["eyJhbGciOiJFUzI1NiJ9.example"],
)
TLS: Any = Field(
    default=None,
    validation_alias="TEMPORAL_TLS",
    description="TLS to the frontend: `1` on (trusting the system's CAs unless "
    "TEMPORAL_TLS_SERVER_CA_CERT_PATH says), `0` off whatever else says; unset: on when an "
    "API key, a TLS file or a server name is given",
    examples=["1", "0"],
)
CLIENT_CERT_PATH: Any = Field(
    default=None,
    validation_alias="TEMPORAL_TLS_CLIENT_CERT_PATH",
    description="the client certificate (PEM) for mutual TLS, with TEMPORAL_TLS_CLIENT_KEY_PATH",
    examples=["/etc/temporal/client.pem"],
)
CLIENT_KEY_PATH: Any = Field(
    default=None,
    validation_alias="TEMPORAL_TLS_CLIENT_KEY_PATH",
    description="the private key (PEM) of that certificate",
    examples=["/etc/temporal/client.key"],
)
SERVER_CA_CERT_PATH: Any = Field(
    default=None,
    validation_alias="TEMPORAL_TLS_SERVER_CA_CERT_PATH",
    description="the CA certificate (PEM) that signed the server's; unset: the system's "
    "trusted CAs (right for Temporal Cloud)",
    examples=["/etc/temporal/ca.pem"],
)
SERVER_NAME: Any = Field(
    default=None,
    validation_alias="TEMPORAL_TLS_SERVER_NAME",
    description="the name the server's certificate must carry (and TLS SNI), when it is not "
    "the address's host",
    examples=["temporal.internal.example"],
)
PROFILE: Any = Field(
    default=None,
    validation_alias="TEMPORAL_PROFILE",
    description="a profile of the TOML file (TEMPORAL_CONFIG_FILE) to take the Temporal "
    "settings from; each TEMPORAL_* variable set overrides its value",
    examples=["prod"],
)
CONFIG_FILE: Any = Field(
    default=None,
    validation_alias="TEMPORAL_CONFIG_FILE",
    description="a TOML file of Temporal profiles (`[profile.prod]`), as the Temporal CLI "
    f"writes it; unset, with TEMPORAL_PROFILE set: `{DEFAULT_CONFIG_FILE}`",
    examples=["/etc/temporal/temporal.toml"],
)
PROFILE_VALUES: Any = Field(default_factory=dict, repr=False)
"""What the profile (and Temporal's variables that `Settings` does not declare, such as
TEMPORAL_GRPC_META_* or TEMPORAL_TLS_CLIENT_CERT_DATA) add to the declared fields, as
`temporalio.envconfig.ClientConfigProfile.to_dict()` has it. Not a variable."""

DECLARED = frozenset(
    {
        "TEMPORAL_ADDRESS",
        "TEMPORAL_NAMESPACE",
        "TEMPORAL_API_KEY",
        "TEMPORAL_TLS",
        "TEMPORAL_TLS_CLIENT_CERT_PATH",
        "TEMPORAL_TLS_CLIENT_KEY_PATH",
        "TEMPORAL_TLS_SERVER_CA_CERT_PATH",
        "TEMPORAL_TLS_SERVER_NAME",
        "TEMPORAL_PROFILE",
        "TEMPORAL_CONFIG_FILE",
    }
)


def profile_origin(profile: str | None, config_file: Path | None) -> str:
    """How a message names where a profile's values came from."""
    return f"profile {profile or 'default'!r} of {config_file or DEFAULT_CONFIG_FILE}"


def with_profile(settings: Settings, env: Mapping[str, str], namespace_set: bool) -> Settings:
    """`settings` with what the selected profile adds (see the module's docstring): the
    address and namespace where no variable gave them, and the rest in
    `temporal_profile_values`. `namespace_set`: TEMPORAL_NAMESPACE was given.

    Raises `ConfigurationError` naming the variable for an unknown profile or a file
    Temporal cannot read."""
    profile, config_file = settings.temporal_profile, settings.temporal_config_file
    undeclared = {
        name: value
        for name, value in env.items()
        if name.startswith("TEMPORAL_") and name not in DECLARED and value.strip()
    }
    if profile is None and config_file is None and not undeclared:
        return settings
    # Imported here: it loads Temporal's native bridge, which a process whose deployment names
    # no profile (most, and every `think settings`) need not pay for.
    from temporalio.envconfig import ClientConfig, ClientConfigProfile

    try:
        loaded = ClientConfigProfile.load(
            profile,
            config_source=config_file,
            disable_file=profile is None and config_file is None,
            override_env_vars=undeclared,
        )
    except RuntimeError as error:  # temporalio's ConfigError
        reason = " ".join(str(error).split())
        if "not found" in reason and reason.startswith("Profile"):
            try:
                names = sorted(ClientConfig.load(config_source=config_file).profiles)
            except RuntimeError:
                names = []
            where = (
                str(config_file)
                if config_file
                else f"{DEFAULT_CONFIG_FILE} (Temporal's default; TEMPORAL_CONFIG_FILE names "
                "another file)"
            )
            has = f"; it has {', '.join(repr(n) for n in names)}" if names else ""
            raise ConfigurationError(
                f"TEMPORAL_PROFILE={profile or 'default'!r}: no such profile in {where}{has}"
            ) from None
        origin = profile_origin(profile, config_file)
        raise ConfigurationError(f"Temporal {origin}: {reason}") from None
    values = loaded.to_dict()
    update: dict[str, Any] = {
        "temporal_profile_values": {
            k: v for k, v in values.items() if k not in ("address", "namespace")
        }
    }
    address = values.get("address")
    if address and settings.temporal_address is None:
        try:
            update["temporal_address"] = _host_port(address)
        except ValueError as error:
            where = profile_origin(profile, config_file)
            raise ConfigurationError(f"address {address!r} of {where}: {error}") from None
    namespace = values.get("namespace")
    if namespace and not namespace_set:
        update["temporal_namespace"] = namespace
    return settings.model_copy(update=update)
