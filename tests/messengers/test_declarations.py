"""Messenger declarations: verification is explicit, secrets come from the environment, and
Telegram's verification compares the secret header in constant time."""

from __future__ import annotations

import pytest

from think import TelegramMessenger
from think.messengers import MessengerConfigError, check_messengers


def test_verification_is_explicit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TG_TOKEN", "1:t")
    monkeypatch.setenv("TG_SECRET", "s")
    with pytest.raises(MessengerConfigError, match="no verification posture"):
        TelegramMessenger(token_env="TG_TOKEN").check()
    TelegramMessenger(token_env="TG_TOKEN", secret_token_env="TG_SECRET").check()
    TelegramMessenger(token_env="TG_TOKEN", verify=False).check()


def test_a_named_variable_must_be_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TG_TOKEN", "1:t")
    monkeypatch.delenv("TG_SECRET", raising=False)
    declared = TelegramMessenger(token_env="TG_TOKEN", secret_token_env="TG_SECRET")
    with pytest.raises(MessengerConfigError, match="'TG_SECRET' is not set"):
        declared.check()


def test_names_are_path_segments_and_unique(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TG_TOKEN", "1:t")
    with pytest.raises(MessengerConfigError, match="path segment"):
        TelegramMessenger(name="Tele gram", token_env="TG_TOKEN", verify=False)
    one = TelegramMessenger(token_env="TG_TOKEN", verify=False)
    with pytest.raises(MessengerConfigError, match="twice"):
        check_messengers("bot", [one, one])
    with pytest.raises(MessengerConfigError, match="must be a Messenger"):
        check_messengers("bot", ["telegram"])  # type: ignore[list-item]


def test_the_secret_header_is_compared_exactly(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TG_TOKEN", "1:t")
    monkeypatch.setenv("TG_SECRET", "right-secret")
    client = TelegramMessenger(token_env="TG_TOKEN", secret_token_env="TG_SECRET").client()
    header = "x-telegram-bot-api-secret-token"
    assert client.verify({header: "right-secret"}, b"{}")
    for wrong in ("wrong-secret", "right-secret ", "", "RIGHT-SECRET"):
        assert not client.verify({header: wrong}, b"{}")
    assert not client.verify({}, b"{}")
    open_door = TelegramMessenger(token_env="TG_TOKEN", verify=False).client()
    assert open_door.verify({}, b"{}")
    monkeypatch.setenv("TG_SECRET", "")  # an empty secret verifies nothing
    assert not client.verify({header: ""}, b"{}")
