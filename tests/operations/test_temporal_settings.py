"""The Temporal connection's settings as Temporal's environment configuration has them
(`temporalio.envconfig`): which value wins (a variable, the TOML profile, a running
`think dev`, the defaults), what `Client.connect` is given, and a one-line error naming the
setting for what settings alone can tell wrong (an unknown profile, a missing or non-PEM
file). The connections themselves, over TLS, mTLS and with an API key, are
tests/operations/test_temporal_tls.py's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from temporalio.service import TLSConfig

from think._settings import Settings
from think.exceptions import ConfigurationError
from think.workflows import connect_config

PEM_CERT = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
PEM_KEY = "-----BEGIN PRIVATE KEY-----\nMIIB\n-----END PRIVATE KEY-----\n"


def _read(**env: str) -> Settings:
    return Settings.from_env(env, find_dev_stack=False)


@pytest.fixture
def profiles(tmp_path: Path) -> Path:
    """A TOML file of two profiles, as the Temporal CLI writes them."""
    ca = tmp_path / "ca.pem"
    ca.write_text(PEM_CERT)
    path = tmp_path / "temporal.toml"
    path.write_text(
        f"""
[profile.default]
address = "localhost:7233"

[profile.cloud]
address = "acme.a1b2c.tmprl.cloud:7233"
namespace = "acme.a1b2c"
api_key = "key-from-the-file"

[profile.cloud.tls]
server_ca_cert_path = "{ca}"
server_name = "acme.a1b2c.tmprl.cloud"

[profile.cloud.grpc_meta]
x-deployment = "eu"
"""
    )
    return path


def test_a_profile_gives_what_no_variable_does(profiles: Path) -> None:
    read = _read(TEMPORAL_CONFIG_FILE=str(profiles), TEMPORAL_PROFILE="cloud")
    assert (read.temporal_address, read.temporal_namespace) == (
        "acme.a1b2c.tmprl.cloud:7233",
        "acme.a1b2c",
    )
    config = connect_config(read)
    assert config["target_host"] == "acme.a1b2c.tmprl.cloud:7233"
    assert config["namespace"] == "acme.a1b2c"
    assert config["api_key"] == "key-from-the-file"
    assert config["rpc_metadata"] == {"x-deployment": "eu"}
    tls = config["tls"]
    assert isinstance(tls, TLSConfig)
    assert (tls.domain, tls.server_root_ca_cert) == ("acme.a1b2c.tmprl.cloud", PEM_CERT.encode())


def test_each_variable_overrides_its_value_of_the_profile(profiles: Path, tmp_path: Path) -> None:
    other_ca = tmp_path / "other-ca.pem"
    other_ca.write_text(PEM_CERT.replace("MIIB", "MIIC"))
    read = _read(
        TEMPORAL_CONFIG_FILE=str(profiles),
        TEMPORAL_PROFILE="cloud",
        TEMPORAL_ADDRESS="127.0.0.1:7233",
        TEMPORAL_NAMESPACE="staging",
        TEMPORAL_API_KEY="key-from-the-environment",
        TEMPORAL_TLS_SERVER_CA_CERT_PATH=str(other_ca),
        TEMPORAL_GRPC_META_X_TEAM="search",  # Temporal's own variable, not declared by Think
    )
    config = connect_config(read)
    assert (config["target_host"], config["namespace"]) == ("127.0.0.1:7233", "staging")
    assert config["api_key"] == "key-from-the-environment"
    assert config["rpc_metadata"] == {"x-deployment": "eu", "x-team": "search"}
    tls = config["tls"]
    assert isinstance(tls, TLSConfig)
    assert tls.server_root_ca_cert == other_ca.read_bytes()
    assert tls.domain == "acme.a1b2c.tmprl.cloud"  # not overridden: the profile's
    # TEMPORAL_TLS=0 turns TLS off whatever the profile and the API key say.
    assert connect_config(_read(TEMPORAL_TLS="0", TEMPORAL_ADDRESS="a:1"))["tls"] is False
    plain_with_key = connect_config(
        _read(
            TEMPORAL_CONFIG_FILE=str(profiles),
            TEMPORAL_PROFILE="cloud",
            TEMPORAL_TLS="0",
        )
    )
    assert (plain_with_key["tls"], plain_with_key["api_key"]) == (False, "key-from-the-file")


def test_tls_is_on_with_an_api_key_or_any_tls_setting_and_off_without(tmp_path: Path) -> None:
    address = {"TEMPORAL_ADDRESS": "temporal:7233"}
    plain = connect_config(_read(**address))
    assert (plain["target_host"], plain["namespace"]) == ("temporal:7233", "default")
    assert "tls" not in plain and "api_key" not in plain
    keyed = connect_config(_read(**address, TEMPORAL_API_KEY="k"))
    assert (keyed["api_key"], keyed["tls"]) == ("k", True)
    named = connect_config(_read(**address, TEMPORAL_TLS_SERVER_NAME="temporal.internal"))
    assert isinstance(named["tls"], TLSConfig) and named["tls"].domain == "temporal.internal"
    cert, key = tmp_path / "client.pem", tmp_path / "client.key"
    cert.write_text(PEM_CERT)
    key.write_text(PEM_KEY)
    mutual = connect_config(
        _read(
            **address,
            TEMPORAL_TLS_CLIENT_CERT_PATH=str(cert),
            TEMPORAL_TLS_CLIENT_KEY_PATH=str(key),
        )
    )
    tls = mutual["tls"]
    assert isinstance(tls, TLSConfig)
    assert (tls.client_cert, tls.client_private_key) == (cert.read_bytes(), key.read_bytes())
    assert tls.server_root_ca_cert is None  # the system's CAs
    assert connect_config(_read(**address, TEMPORAL_TLS="1"))["tls"] == TLSConfig()


def test_the_address_of_a_profile_wins_over_a_running_think_dev(
    profiles: Path, tmp_path: Path
) -> None:
    home = tmp_path / ".think"
    home.mkdir()
    (home / "endpoints.json").write_text(
        json.dumps({"database_url": "postgresql://x@h/db", "temporal_address": "127.0.0.1:7999"})
    )
    dev = Settings.from_env({"THINK_HOME": str(home)})
    assert dev.temporal_address == "127.0.0.1:7999"  # no profile: the dev server's
    profiled = Settings.from_env(
        {"THINK_HOME": str(home), "TEMPORAL_CONFIG_FILE": str(profiles)}  # profile `default`
    )
    assert profiled.temporal_address == "localhost:7233"
    assert profiled.database_url == "postgresql://x@h/db"
    variable = Settings.from_env(
        {
            "THINK_HOME": str(home),
            "TEMPORAL_CONFIG_FILE": str(profiles),
            "TEMPORAL_ADDRESS": "temporal:7233",
        }
    )
    assert variable.temporal_address == "temporal:7233"


def test_a_profile_file_is_read_only_when_named(
    profiles: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Temporal's default file (here under a HOME of the test's) is read once TEMPORAL_PROFILE
    names a profile, never otherwise: a Temporal CLI profile on a developer's machine does
    not redirect `think dev`."""
    default_file = tmp_path / "home" / ".config" / "temporalio" / "temporal.toml"
    default_file.parent.mkdir(parents=True)
    default_file.write_text(profiles.read_text())
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    assert _read().temporal_address is None
    assert _read(TEMPORAL_PROFILE="cloud").temporal_address == "acme.a1b2c.tmprl.cloud:7233"


def test_an_unknown_profile_is_named_with_those_there_are(profiles: Path) -> None:
    with pytest.raises(ConfigurationError) as raised:
        _read(TEMPORAL_CONFIG_FILE=str(profiles), TEMPORAL_PROFILE="prod")
    assert str(raised.value) == (
        f"TEMPORAL_PROFILE='prod': no such profile in {profiles}; it has 'cloud', 'default'"
    )


def test_files_that_cannot_be_used_are_named_by_their_setting(
    profiles: Path, tmp_path: Path
) -> None:
    with pytest.raises(ConfigurationError) as raised:
        _read(TEMPORAL_CONFIG_FILE=str(tmp_path / "missing.toml"))
    assert str(raised.value) == (
        f"TEMPORAL_CONFIG_FILE={str(tmp_path / 'missing.toml')!r}: no such file"
    )
    with pytest.raises(ConfigurationError, match=r"^TEMPORAL_TLS_CLIENT_KEY_PATH='/nowhere/k"):
        _read(TEMPORAL_TLS_CLIENT_KEY_PATH="/nowhere/key.pem")
    not_pem = tmp_path / "ca.txt"
    not_pem.write_text("a CA, or so they said")
    with pytest.raises(ConfigurationError) as raised:
        connect_config(_read(TEMPORAL_ADDRESS="t:1", TEMPORAL_TLS_SERVER_CA_CERT_PATH=str(not_pem)))
    assert str(raised.value) == (
        f"TEMPORAL_TLS_SERVER_CA_CERT_PATH={str(not_pem)!r}: not a PEM certificate "
        "(no '-----BEGIN CERTIFICATE-----' in it)"
    )
    broken = tmp_path / "broken.toml"
    broken.write_text("[profile.default\naddress = 1\n")
    with pytest.raises(ConfigurationError, match=r"^Temporal profile 'default' of .*broken.toml: "):
        _read(TEMPORAL_CONFIG_FILE=str(broken))
    # A file the profile names, gone by the time the client connects: named by its profile.
    gone = tmp_path / "gone.pem"
    gone.write_text(PEM_CERT)
    named = tmp_path / "named.toml"
    named.write_text(
        f'[profile.default]\naddress = "t:1"\n[profile.default.tls]\n'
        f'client_cert_path = "{gone}"\nclient_key_path = "{gone}"\n'
    )
    read = _read(TEMPORAL_CONFIG_FILE=str(named))
    gone.unlink()
    with pytest.raises(ConfigurationError) as raised:
        connect_config(read)
    assert str(raised.value) == (
        f"the TLS file {str(gone)!r} of profile 'default' of {named}: cannot be read: "
        "No such file or directory"
    )


def test_no_address_anywhere_says_where_one_comes_from() -> None:
    with pytest.raises(ConfigurationError, match=r"set TEMPORAL_ADDRESS \(or a TEMPORAL_PROFILE"):
        connect_config(_read())
