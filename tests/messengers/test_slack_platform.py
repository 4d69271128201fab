"""`SlackPlatform` on the messenger seam, against the fake Slack (no stack: fast): the
declaration's verification posture, what each request becomes, and the Web API calls
delivery makes (post, edit, buttons, the presser's note, attachments)."""

import time
from collections.abc import Iterator

import pytest

from tests._fake_slack import (
    BOT_TOKEN,
    SIGNING_SECRET,
    FakeSlack,
    block_actions,
    event,
    fake_slack,
    mention_event,
    message_event,
    signed_headers,
    url_verification,
)
from think.messengers import (
    AttachmentRef,
    AttachmentTooLarge,
    Button,
    Challenge,
    Ignored,
    InboundEvent,
    MessengerConfigError,
    PlatformError,
    RateLimited,
    SlackMessenger,
    SlackPlatform,
    ThreadRef,
)


@pytest.fixture
def slack(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeSlack]:
    monkeypatch.setenv("SLACK_BOT_TOKEN", BOT_TOKEN)
    monkeypatch.setenv("SLACK_SIGNING_SECRET", SIGNING_SECRET)
    with fake_slack(edit_interval=0.0) as running:
        yield running


def platform(slack: FakeSlack, **fields: object) -> SlackPlatform:
    messenger = SlackMessenger(
        signing_secret_env="SLACK_SIGNING_SECRET", api_url=slack.api_url, **fields
    )
    messenger.check()
    client = messenger.client()
    assert isinstance(client, SlackPlatform)
    return client


def test_a_declaration_without_a_verification_posture_refuses_to_load(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SLACK_BOT_TOKEN", BOT_TOKEN)
    with pytest.raises(MessengerConfigError, match="signing_secret_env"):
        SlackMessenger().check()
    SlackMessenger(verify=False).check()
    with pytest.raises(MessengerConfigError, match="SLACK_SIGNING_SECRET"):
        SlackMessenger(signing_secret_env="SLACK_SIGNING_SECRET").check()


def test_verification_refuses_forgeries_and_replays(slack: FakeSlack) -> None:
    client = platform(slack)
    body = event(message_event("D1", "U1", "hi"))
    lower = {k.lower(): v for k, v in signed_headers(body).items()}
    assert client.verify(lower, body)
    assert not client.verify({**lower, "x-slack-signature": "v0=" + "0" * 64}, body)
    stale = signed_headers(body, timestamp=int(time.time()) - 6 * 60)
    assert not client.verify({k.lower(): v for k, v in stale.items()}, body)
    assert SlackMessenger(verify=False, api_url=slack.api_url).client().verify({}, body)


async def test_a_dm_is_an_event_in_its_own_thread(slack: FakeSlack) -> None:
    slack.names["U1"] = "ada"
    read = await platform(slack).parse(event(message_event("D1", "U1", "hi", ts="5.1")))
    assert isinstance(read, InboundEvent)
    assert read.thread == ThreadRef(chat="D1", thread="5.1")
    assert (read.author.id, read.author.label, read.chat_kind) == ("U1", "ada", "private")
    assert read.is_dm and not read.mentions_bot and read.text == "hi"


async def test_a_mention_and_a_subscribed_thread_reply(slack: FakeSlack) -> None:
    client = platform(slack)
    mention = await client.parse(event(mention_event("C1", "U1", "hello", ts="7.1")))
    assert isinstance(mention, InboundEvent)
    assert mention.mentions_bot and not mention.is_dm and mention.chat_kind == "group"
    assert mention.thread == ThreadRef(chat="C1", thread="7.1")
    reply = await client.parse(
        event(message_event("C1", "U2", "and me", channel_type="channel", thread_ts="7.1"))
    )
    assert isinstance(reply, InboundEvent)
    assert not reply.mentions_bot and reply.thread == mention.thread


async def test_challenges_and_ignored_events(slack: FakeSlack) -> None:
    client = platform(slack)
    assert await client.parse(url_verification("xyz")) == Challenge(value="xyz")
    edited = event(message_event("D1", "U1", "x", subtype="message_changed"))
    assert isinstance(await client.parse(edited), Ignored)
    with pytest.raises(ValueError, match="not JSON"):
        await client.parse(b"nope")


async def test_a_press_is_an_event_and_a_verdict_settles_the_message(slack: FakeSlack) -> None:
    client = platform(slack)
    thread = ThreadRef(chat="C1", thread="9.1")
    buttons = [Button(label="Approve", data="a:ap1"), Button(label="Deny", data="d:ap1")]
    asked = await client.send_buttons(thread, "Run `rm`?", buttons)
    [message] = slack.posted("C1")
    body = block_actions(
        user="U3",
        channel="C1",
        message_ts=asked,
        thread_ts="9.1",
        action_id="think_button_0",
        value="a:ap1",
        blocks=message.blocks,
    )
    read = await client.parse(body)
    assert isinstance(read, InboundEvent) and read.button is not None
    assert (read.button.data, read.button.message_id) == ("a:ap1", asked)
    assert read.thread == thread and read.author.id == "U3"
    await client.answer_button(read.button.press_id, "Approved.")
    assert slack.ephemerals == [("C1", "U3", "Approved.")]
    settled = slack.posted("C1")[0].blocks
    assert settled == [
        {"type": "section", "text": {"type": "mrkdwn", "text": "Run `rm`?"}},
        {"type": "context", "elements": [{"type": "mrkdwn", "text": "Approved by <@U3>"}]},
    ]
    await client.answer_button(read.button.press_id, "Already decided.")
    assert slack.ephemerals[-1] == ("C1", "U3", "Already decided.")
    assert slack.posted("C1")[0].blocks == settled


async def test_delivery_calls(slack: FakeSlack) -> None:
    client = platform(slack)
    thread = ThreadRef(chat="C1", thread="9.1")
    ts = await client.send(thread, client.format("**hi** & bye"))
    await client.edit(thread, ts, client.format("**hi** & bye, all"))
    asked = await client.send_buttons(
        thread, "Run `rm`?", [Button(label="Approve", data="a"), Button(label="Deny", data="d")]
    )
    [reply, approval] = slack.posted("C1")
    assert (reply.ts, reply.thread_ts, reply.text) == (ts, "9.1", "*hi* &amp; bye, all")
    assert approval.ts == asked and approval.blocks is not None
    assert [b["value"] for b in approval.blocks[-1]["elements"]] == ["a", "d"]
    await client.edit(thread, asked, "Approved by ada")
    assert slack.posted("C1")[1].blocks == [
        {"type": "section", "text": {"type": "mrkdwn", "text": "Approved by ada"}}
    ]
    with pytest.raises(PlatformError, match="message_not_found"):
        await client.edit(thread, "1.1", "x")


async def test_an_edit_too_soon_is_rate_limited(slack: FakeSlack) -> None:
    client = platform(slack)
    thread = ThreadRef(chat="C1", thread="9.1")
    ts = await client.send(thread, "a")
    slack.edit_interval = 60
    await client.edit(thread, ts, "b")
    with pytest.raises(RateLimited) as limited:
        await client.edit(thread, ts, "c")
    assert limited.value.retry_after == 1.0


async def test_attachments_are_fetched_with_the_token_within_the_limit(slack: FakeSlack) -> None:
    client = platform(slack)
    url = slack.add_file("F1", "notes.txt", b"x" * 5000)
    ref = AttachmentRef(file_id=url, filename="notes.txt", media_type="text/plain")
    assert await client.fetch_attachment(ref, 10_000) == b"x" * 5000
    with pytest.raises(AttachmentTooLarge):
        await client.fetch_attachment(ref, 4000)
    declared = AttachmentRef(file_id=url, size=20_000, filename="notes.txt")
    with pytest.raises(AttachmentTooLarge):
        await client.fetch_attachment(declared, 10_000)
    elsewhere = AttachmentRef(file_id="http://files.example.net/x", filename="x")
    with pytest.raises(PlatformError, match="not on Slack"):
        await client.fetch_attachment(elsewhere, 10_000)


async def test_a_shared_file_is_an_attachment(slack: FakeSlack) -> None:
    url = slack.add_file("F2", "a.png", b"png")
    files = [{"id": "F2", "name": "a.png", "mimetype": "image/png", "size": 3, "url_private": url}]
    body = event(message_event("D1", "U1", "look", subtype="file_share", files=files))
    read = await platform(slack).parse(body)
    assert isinstance(read, InboundEvent)
    assert read.attachments == (
        AttachmentRef(file_id=url, size=3, filename="a.png", media_type="image/png"),
    )


async def test_a_name_slack_will_not_say_is_the_user_id(slack: FakeSlack) -> None:
    read = await platform(slack).parse(event(message_event("D1", "W0UNKNOWN", "hi")))
    assert isinstance(read, InboundEvent)
    assert read.author.label == "W0UNKNOWN"
    assert [c.answer["error"] for c in slack.calls_of("users.info")] == ["user_not_found"]
