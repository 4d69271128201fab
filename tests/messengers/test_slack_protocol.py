"""Slack's side of the wire without the stack: signatures and their replay window, what each
Events API and interactivity body becomes, and the Web API client against the fake Slack."""

import time

import pytest

from tests._fake_slack import (
    BOT_TOKEN,
    BOT_USER,
    SIGNING_SECRET,
    block_actions,
    event,
    fake_slack,
    mention_event,
    message_event,
    signed_headers,
    url_verification,
)
from think.messengers._slack_api import SlackApi, SlackCallFailed, SlackRateLimited, button_blocks
from think.messengers._slack_events import (
    SlackAction,
    SlackChallenge,
    SlackIgnored,
    SlackMessage,
    SlackRequestError,
    read_slack,
    verify_slack,
)

JSON = "application/json"
FORM = "application/x-www-form-urlencoded"


def test_a_signed_body_verifies() -> None:
    body = event(message_event("D1", "U1", "hi"))
    assert verify_slack(body, signed_headers(body), SIGNING_SECRET)


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"X-Slack-Request-Timestamp": "abc", "X-Slack-Signature": "v0=00"},
        {"X-Slack-Request-Timestamp": str(int(time.time())), "X-Slack-Signature": "v0=00"},
    ],
)
def test_missing_or_forged_signatures_do_not_verify(headers: dict[str, str]) -> None:
    assert not verify_slack(b"{}", headers, SIGNING_SECRET)


def test_another_secret_or_a_changed_body_does_not_verify() -> None:
    body = event(message_event("D1", "U1", "hi"))
    assert not verify_slack(body, signed_headers(body, secret="another"), SIGNING_SECRET)
    assert not verify_slack(body + b" ", signed_headers(body), SIGNING_SECRET)


def test_a_stale_timestamp_is_a_replay() -> None:
    body = event(message_event("D1", "U1", "hi"))
    stale = signed_headers(body, timestamp=int(time.time()) - 301)
    assert not verify_slack(body, stale, SIGNING_SECRET)
    fresh_enough = signed_headers(body, timestamp=int(time.time()) - 200)
    assert verify_slack(body, fresh_enough, SIGNING_SECRET)


def test_url_verification_is_a_challenge() -> None:
    assert read_slack(url_verification("c-123"), JSON) == SlackChallenge(challenge="c-123")


def test_a_dm_is_a_message_in_its_own_thread() -> None:
    inner = message_event("D1", "U1", "hello &amp; <https://x.io|x> <@U2>", ts="100.1")
    read = read_slack(event(inner, event_id="Ev1"), JSON)
    assert isinstance(read, SlackMessage)
    assert (read.key, read.channel, read.thread_ts, read.user) == ("Ev1", "D1", "100.1", "U1")
    assert read.direct and not read.mentioned and not read.in_thread
    assert read.text == "hello & x (https://x.io) @U2"


def test_a_mention_drops_the_bots_name_and_keeps_its_thread() -> None:
    inner = mention_event("C1", "U1", "what now?", thread_ts="90.5", ts="100.2")
    read = read_slack(event(inner), JSON)
    assert isinstance(read, SlackMessage)
    assert read.mentioned and read.in_thread and not read.direct
    assert (read.thread_ts, read.text, read.thread_key) == ("90.5", "what now?", "C1:90.5")


@pytest.mark.parametrize(
    "inner",
    [
        message_event("D1", BOT_USER, "my own words"),
        message_event("D1", "U1", "a bot", bot_id="B9"),
        message_event("D1", "U1", "edited", subtype="message_changed"),
        message_event("C1", "U1", "joined", channel_type="channel", subtype="channel_join"),
        message_event("C1", "U1", f"<@{BOT_USER}> twin", channel_type="channel"),
        message_event("C1", "U1", "top-level chatter", channel_type="channel"),
        {"type": "reaction_added", "user": "U1"},
    ],
)
def test_bots_subtypes_and_twins_are_ignored(inner: dict[str, object]) -> None:
    assert isinstance(read_slack(event(inner), JSON), SlackIgnored)


def test_a_shared_file_is_a_message_with_its_file() -> None:
    files = [
        {
            "id": "F1",
            "name": "a.png",
            "mimetype": "image/png",
            "size": 3,
            "url_private": "https://files.slack.com/F1/a.png",
        }
    ]
    inner = message_event("D1", "U1", "look", subtype="file_share", files=files)
    read = read_slack(event(inner), JSON)
    assert isinstance(read, SlackMessage)
    assert [f.name for f in read.files] == ["a.png"]


def test_a_button_press_is_an_action() -> None:
    body = block_actions(
        user="U7",
        channel="C1",
        message_ts="200.1",
        thread_ts="100.1",
        action_id="think_button_0",
        value="approval-1",
    )
    read = read_slack(body, FORM)
    assert isinstance(read, SlackAction)
    assert (read.user, read.channel, read.message_ts, read.thread_ts) == (
        "U7",
        "C1",
        "200.1",
        "100.1",
    )
    assert (read.action_id, read.value) == ("think_button_0", "approval-1")


@pytest.mark.parametrize(
    ("body", "kind"),
    [
        (b"not json", JSON),
        (b"[1]", JSON),
        (b'{"type": "event_callback"}', JSON),
        (b"payload=%7B", FORM),
    ],
)
def test_bodies_of_no_known_shape_are_refused(body: bytes, kind: str) -> None:
    with pytest.raises(SlackRequestError):
        read_slack(body, kind)


async def test_the_client_posts_in_threads_and_edits() -> None:
    with fake_slack(edit_interval=0.0) as slack:
        api = SlackApi(BOT_TOKEN, slack.api_url)
        assert await api.bot_user_id() == BOT_USER
        ts = await api.post("C1", "first", thread_ts="100.1")
        await api.update("C1", ts, "second")
        await api.update("C1", ts, "third")
        [message] = slack.posted("C1")
        assert (message.thread_ts, message.text, message.edits) == (
            "100.1",
            "third",
            ["second", "third"],
        )
        slack.names["U7"] = "ada"
        assert await api.user_label("U7") == "ada"
        await api.ephemeral("C1", "U7", "only you", thread_ts="100.1")
        assert slack.ephemerals == [("C1", "U7", "only you")]


async def test_a_429_is_a_typed_wait_with_slacks_retry_after() -> None:
    with fake_slack(edit_interval=60) as slack:
        api = SlackApi(BOT_TOKEN, slack.api_url)
        ts = await api.post("C1", "first")
        await api.update("C1", ts, "second")
        with pytest.raises(SlackRateLimited) as raised:
            await api.update("C1", ts, "too soon")
        assert raised.value.retry_after == 1.0
        assert [c.status for c in slack.calls_of("chat.update")] == [200, 429]
        assert slack.posted("C1")[0].text == "second"


async def test_slack_errors_are_typed() -> None:
    with fake_slack() as slack:
        with pytest.raises(SlackCallFailed, match="invalid_auth"):
            await SlackApi("xoxb-wrong", slack.api_url).post("C1", "x")
        with pytest.raises(SlackCallFailed, match="message_not_found"):
            await SlackApi(BOT_TOKEN, slack.api_url).update("C1", "1.2", "x")


async def test_buttons_carry_their_data_and_an_edit_replaces_them() -> None:
    with fake_slack(edit_interval=0.0) as slack:
        api = SlackApi(BOT_TOKEN, slack.api_url)
        blocks = button_blocks("*Approve* `transfer`?", [("Approve", "a:1"), ("Deny", "d:1")])
        ts = await api.post("C1", "Approve transfer?", thread_ts="1.1", blocks=blocks)
        [message] = slack.posted()
        assert message.blocks is not None
        buttons = message.blocks[-1]["elements"]
        assert [(b["value"], b.get("style")) for b in buttons] == [
            ("a:1", "primary"),
            ("d:1", "danger"),
        ]
        await api.update("C1", ts, "approved", blocks=[])
        assert slack.posted()[0].blocks is None
