"""Slack end to end: the fake Slack's events signed and POSTed to a gateway, turns on a
worker, replies through the fake Web API (real Postgres, Temporal, worker and gateway)."""

from __future__ import annotations

import asyncio
import json
import secrets
import time
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest
from sqlalchemy import text as sql
from sqlalchemy.ext.asyncio import AsyncEngine

from tests._fake_slack import (
    BOT_TOKEN,
    SIGNING_SECRET,
    FakeSlack,
    Message,
    block_actions,
    event,
    fake_slack,
    mention_event,
    message_event,
    next_ts,
    signed_headers,
    url_verification,
)
from tests._stack import Stack, own_stack
from tests._waits import eventually, now
from think.testing import FakeOpenAIServer, reply, stall, text, tool_call

AGENT = "slack_helper"
WEBHOOK = f"/v1/messengers/{AGENT}/slack/webhook"
JSON = {"Content-Type": "application/json"}
FORM = {"Content-Type": "application/x-www-form-urlencoded"}


@pytest.fixture(scope="module")
def slack() -> Iterator[FakeSlack]:
    with fake_slack(edit_interval=0.5) as running:
        yield running


@pytest.fixture(scope="module")
def slack_stack(
    stack: Stack, slack: FakeSlack, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stack]:
    env = {
        **stack.env,
        "THINK_TASK_QUEUE": f"slack-{secrets.token_hex(4)}",
        "THINK_AGENTS": "tests.slack_agents:SlackHelper,tests.slack_agents:SlackGuarded",
        "SLACK_TEST_API_URL": slack.api_url,
        "SLACK_TEST_BOT_TOKEN": BOT_TOKEN,
        "SLACK_TEST_SIGNING_SECRET": SIGNING_SECRET,
    }
    with own_stack(env, tmp_path_factory.mktemp("slack")) as own:
        yield own


@pytest.fixture
async def gateway(slack_stack: Stack) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=slack_stack.api_url, timeout=30) as client:
        yield client


async def post_event(
    gateway: httpx.AsyncClient, body: bytes, *, retry: int | None = None
) -> httpx.Response:
    return await gateway.post(
        WEBHOOK, content=body, headers={**JSON, **signed_headers(body, retry=retry)}
    )


def channel() -> str:
    return f"C{secrets.token_hex(4).upper()}"


def dm() -> str:
    return f"D{secrets.token_hex(4).upper()}"


async def replies(slack: FakeSlack, chat: str, thread_ts: str, count: int = 1) -> list[Message]:
    """The bot's messages in a thread, once `count` of them are there and settled."""

    async def found() -> list[Message] | None:
        got = [m for m in slack.posted(chat) if m.thread_ts == thread_ts]
        return got if len(got) >= count else None

    return await eventually(found, within=30)


async def final_text(slack: FakeSlack, chat: str, thread_ts: str, expected: str) -> Message:
    async def found() -> Message | None:
        got = [m for m in slack.posted(chat) if m.thread_ts == thread_ts and m.text == expected]
        return got[0] if got else None

    return await eventually(found, within=30)


async def events_stored(engine: AsyncEngine, event_id: str) -> int:
    async with engine.connect() as conn:
        found = await conn.execute(
            sql("SELECT count(*) FROM messenger_events WHERE agent = :a AND event_id = :e"),
            {"a": AGENT, "e": event_id},
        )
        return int(found.scalar_one())


async def deliveries(engine: AsyncEngine, cid: str) -> int:
    async with engine.connect() as conn:
        found = await conn.execute(
            sql("SELECT count(*) FROM messenger_deliveries WHERE conversation_id = :c"),
            {"c": cid},
        )
        return int(found.scalar_one())


async def test_url_verification_is_answered(gateway: httpx.AsyncClient) -> None:
    response = await post_event(
        gateway, url_verification("3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P")
    )
    assert response.status_code == 200
    assert response.json() == {"challenge": "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"}


async def test_a_forged_or_stale_request_is_refused_and_nothing_stored(
    gateway: httpx.AsyncClient, slack: FakeSlack, engine: AsyncEngine
) -> None:
    chat = dm()
    body = event(message_event(chat, "U1", "let me in"), event_id="EvForged1")
    forged = signed_headers(body, secret="not-the-secret")
    stale = signed_headers(body, timestamp=int(time.time()) - 10 * 60)
    for headers in (forged, stale, {}):
        response = await gateway.post(WEBHOOK, content=body, headers={**JSON, **headers})
        assert response.status_code == 401
        assert response.headers["content-type"].startswith("application/problem+json")
    assert await events_stored(engine, "EvForged1") == 0
    assert slack.posted(chat) == []
    unknown = await gateway.post(
        f"/v1/messengers/{AGENT}/nope/webhook",
        content=body,
        headers={**JSON, **signed_headers(body)},
    )
    assert unknown.status_code == 404


async def test_a_dm_is_answered_in_its_thread(gateway: httpx.AsyncClient, slack: FakeSlack) -> None:
    chat, ts = dm(), next_ts()
    response = await post_event(gateway, event(message_event(chat, "U1", "hello **there**", ts=ts)))
    assert response.status_code == 200
    reply = await final_text(slack, chat, ts, "echo: hello *there*")
    assert reply.thread_ts == ts


async def test_a_mention_and_its_thread_with_two_speakers(
    gateway: httpx.AsyncClient,
    slack: FakeSlack,
    fake_model: FakeOpenAIServer,
    engine: AsyncEngine,
) -> None:
    chat, ts = channel(), next_ts()
    slack.names.update({"UADA": "ada", "UBOB": "bob"})
    assert (
        await post_event(gateway, event(mention_event(chat, "UADA", "hi all", ts=ts)))
    ).status_code == 200
    await final_text(slack, chat, ts, "echo: [ada]: hi all")
    # Bob answers in the thread the mention subscribed, without mentioning the bot.
    later = message_event(chat, "UBOB", "me too", channel_type="channel", thread_ts=ts)
    assert (await post_event(gateway, event(later))).status_code == 200
    await final_text(slack, chat, ts, "echo: [bob]: me too")
    # One conversation: the model heard both speakers, each by name.
    [*_, last] = fake_model.requests(f"slack:{chat}:{ts}")
    said = json.dumps(last["body"]["messages"])
    assert "[ada]: hi all" in said and "[bob]: me too" in said
    # A top-level channel message that mentions nobody reaches no one: nothing stored.
    quiet = message_event(chat, "UBOB", "just chatting", channel_type="channel")
    quiet_id = f"EvQuiet{secrets.token_hex(3)}"
    assert (await post_event(gateway, event(quiet, event_id=quiet_id))).status_code == 200
    assert await events_stored(engine, quiet_id) == 0
    assert [m for m in slack.posted(chat) if m.thread_ts == quiet["ts"]] == []


async def test_the_same_event_twenty_times_at_once_is_answered_once(
    gateway: httpx.AsyncClient, slack: FakeSlack, engine: AsyncEngine
) -> None:
    chat, ts = dm(), next_ts()
    body = event(
        message_event(chat, "U1", "storm", ts=ts), event_id=f"EvStorm{secrets.token_hex(3)}"
    )
    answers = await asyncio.gather(*(post_event(gateway, body) for _ in range(20)))
    assert [a.status_code for a in answers] == [200] * 20
    await final_text(slack, chat, ts, "echo: storm")
    retried = await post_event(gateway, body, retry=1)
    assert retried.status_code == 200 and retried.json().get("duplicate") is True
    # One turn, one delivery: nothing else is on its way to the thread.
    turns = await gateway.get(f"/v1/agents/{AGENT}/conversations/slack:{chat}:{ts}/turns")
    assert len(turns.json()["turns"]) == 1
    assert await deliveries(engine, f"slack:{chat}:{ts}") == 1
    assert len([m for m in slack.posted(chat) if m.thread_ts == ts]) == 1


async def test_an_approval_pressed_in_slack_completes_the_turn(
    gateway: httpx.AsyncClient, slack: FakeSlack, fake_model: FakeOpenAIServer
) -> None:
    chat, ts = dm(), next_ts()
    fake_model.script(
        f"slack:{chat}:{ts}",
        tool_call("delete_file", {"path": "notes.txt"}, id="call_del"),
        text("Deleted it."),
    )
    assert (
        await post_event(gateway, event(message_event(chat, "U1", "delete notes", ts=ts)))
    ).status_code == 200
    [asked] = await replies(slack, chat, ts)
    assert asked.blocks is not None and "notes.txt" in json.dumps(asked.blocks)
    approve = next(b for b in asked.blocks[-1]["elements"] if b["text"]["text"] == "Approve")
    press = block_actions(
        user="U1",
        channel=chat,
        message_ts=asked.ts,
        thread_ts=ts,
        action_id=approve["action_id"],
        value=approve["value"],
        blocks=asked.blocks,
    )
    pressed = await gateway.post(WEBHOOK, content=press, headers={**FORM, **signed_headers(press)})
    assert pressed.status_code == 200
    await final_text(slack, chat, ts, "Deleted it.")
    settled = slack.messages[(chat, asked.ts)].blocks
    assert settled is not None and "Approved by <@U1>" in json.dumps(settled)
    assert all(b["type"] != "actions" for b in settled)
    # A second press (another copy of the message, say) decides nothing.
    again = block_actions(
        user="U2",
        channel=chat,
        message_ts=asked.ts,
        thread_ts=ts,
        action_id=approve["action_id"],
        value=approve["value"],
        blocks=asked.blocks,
    )
    second = await gateway.post(WEBHOOK, content=again, headers={**FORM, **signed_headers(again)})
    assert second.status_code == 200
    assert (chat, "U2", "Already decided.") in slack.ephemerals
    assert slack.messages[(chat, asked.ts)].blocks == settled


async def test_only_a_listed_approver_decides_from_slack(
    gateway: httpx.AsyncClient, slack: FakeSlack, fake_model: FakeOpenAIServer
) -> None:
    chat, ts = channel(), next_ts()
    fake_model.script(
        f"slack:{chat}:{ts}",
        tool_call("delete_file", {"path": "plan.md"}, id="call_plan"),
        text("Gone."),
    )
    hook = "/v1/messengers/slack_guarded/slack/webhook"
    body = event(mention_event(chat, "U1", "delete the plan", ts=ts))
    answer = await gateway.post(hook, content=body, headers={**JSON, **signed_headers(body)})
    assert answer.status_code == 200
    [asked] = await replies(slack, chat, ts)
    assert asked.blocks is not None
    approve = asked.blocks[-1]["elements"][0]

    async def press(user: str) -> None:
        form = block_actions(
            user=user,
            channel=chat,
            message_ts=asked.ts,
            thread_ts=ts,
            action_id=approve["action_id"],
            value=approve["value"],
            blocks=asked.blocks,
        )
        pressed = await gateway.post(hook, content=form, headers={**FORM, **signed_headers(form)})
        assert pressed.status_code == 200

    await press("U1")
    refusal = "You may not decide this (slack:U1 is not among the approvers)."
    assert (chat, "U1", refusal) in slack.ephemerals
    assert slack.messages[(chat, asked.ts)].blocks == asked.blocks  # the buttons stay
    await press("UBOSS")
    await final_text(slack, chat, ts, "Gone.")
    assert "Approved by <@UBOSS>" in json.dumps(slack.messages[(chat, asked.ts)].blocks)


async def test_a_long_reply_streams_by_edits_and_is_split_at_slacks_limit(
    gateway: httpx.AsyncClient, slack: FakeSlack, fake_model: FakeOpenAIServer
) -> None:
    chat, ts = dm(), next_ts()
    paragraphs = [f"Paragraph {i}: " + "lorem ipsum & dolor " * 40 + "\n\n" for i in range(9)]
    fake_model.script(f"slack:{chat}:{ts}", reply(text(*paragraphs), delay=0.05))
    body = event(message_event(chat, "U1", "write a lot", ts=ts))
    assert (await post_event(gateway, body)).status_code == 200
    await turn_ended(gateway, f"slack:{chat}:{ts}")
    last = paragraphs[-1].replace("&", "&amp;").strip()

    async def settled() -> list[Message] | None:
        got = [m for m in slack.posted(chat) if m.thread_ts == ts]
        return got if got and got[-1].text.rstrip().endswith(last) else None

    posted = await eventually(settled, within=30)
    assert len(posted) >= 3
    assert all(0 < len(m.text) <= 3000 for m in posted)
    whole = "".join("".join(m.text for m in posted).split())
    assert whole == "".join("".join(paragraphs).replace("&", "&amp;").split())
    # The first message was posted early and edited as the reply grew, at Slack's rate.
    assert posted[0].edits
    updates = [c for c in slack.calls_of("chat.update") if c.params.get("channel") == chat]
    assert updates and all(c.status in (200, 429) for c in updates)


async def test_attachments_reach_the_model_within_the_limit(
    gateway: httpx.AsyncClient, slack: FakeSlack, fake_model: FakeOpenAIServer
) -> None:
    chat, ts = dm(), next_ts()
    picture = bytes(range(256)) * (5 * 1024 * 1024 // 256)  # 5 MiB
    url = slack.add_file(f"F{secrets.token_hex(3)}", "big.png", picture)
    files = [
        {
            "id": "F1",
            "name": "big.png",
            "mimetype": "image/png",
            "size": len(picture),
            "url_private": url,
        }
    ]
    body = event(
        message_event(chat, "U1", "what is this?", ts=ts, subtype="file_share", files=files)
    )
    assert (await post_event(gateway, body)).status_code == 200
    await final_text(slack, chat, ts, "echo: what is this?")
    [request] = fake_model.requests(f"slack:{chat}:{ts}")
    said = json.dumps(request["body"]["messages"])
    assert said.count("data:image/png;base64,") == 1
    # Over the limit (10 MiB by default): refused before a byte is fetched, and said so.
    chat, ts = dm(), next_ts()
    huge = [
        {
            "id": "F2",
            "name": "huge.bin",
            "mimetype": "application/octet-stream",
            "size": 11 * 1024 * 1024,
            "url_private": slack.file_url("F2", "huge.bin"),
        }
    ]
    body = event(message_event(chat, "U1", "and this?", ts=ts, subtype="file_share", files=huge))
    assert (await post_event(gateway, body)).status_code == 200
    await turn_ended(gateway, f"slack:{chat}:{ts}")
    refused = "huge.bin (11,534,336 bytes) is over the 10,485,760-byte limit"
    notes = [m.text for m in slack.posted(chat) if m.thread_ts == ts]
    assert any(n.startswith("I could not read huge.bin") for n in notes), notes
    [request] = fake_model.requests(f"slack:{chat}:{ts}")
    said = json.dumps(request["body"]["messages"])
    assert f"(an attachment was refused: {refused})" in said and "base64" not in said
    assert [d for d in slack.downloads if "big.png" in d] == [url.split(str(slack.port), 1)[1]]
    assert not [d for d in slack.downloads if "huge.bin" in d]


# A SIGKILLed worker (last in this module: they replace its worker).


async def turn_ended(gateway: httpx.AsyncClient, cid: str) -> dict[str, object]:
    async def ended() -> dict[str, object] | None:
        got = await gateway.get(f"/v1/agents/{AGENT}/conversations/{cid}/turns")
        turns = got.json().get("turns", []) if got.status_code == 200 else []
        done = [t for t in turns if t["status"] not in ("queued", "running", "waiting")]
        return done[0] if turns and len(done) == len(turns) else None

    return await eventually(ended, within=60)


async def test_a_worker_killed_before_the_reply_began_delivers_it_once(
    gateway: httpx.AsyncClient,
    slack: FakeSlack,
    slack_stack: Stack,
    fake_model: FakeOpenAIServer,
) -> None:
    chat, ts = dm(), next_ts()
    cid = f"slack:{chat}:{ts}"
    fake_model.script(cid, stall(60) + text("never shown"), text("The whole answer."))
    assert (
        await post_event(gateway, event(message_event(chat, "U1", "hi", ts=ts)))
    ).status_code == 200
    await eventually(lambda: now(fake_model.calls(cid) >= 1))
    slack_stack.wait_polling(slack_stack.replace_worker())
    await final_text(slack, chat, ts, "The whole answer.")
    assert (await turn_ended(gateway, cid))["status"] == "completed"
    assert [m.text for m in slack.posted(chat)] == ["The whole answer."]


async def test_a_worker_killed_mid_reply_posts_one_interruption_notice(
    gateway: httpx.AsyncClient,
    slack: FakeSlack,
    slack_stack: Stack,
    fake_model: FakeOpenAIServer,
) -> None:
    chat, ts = dm(), next_ts()
    cid = f"slack:{chat}:{ts}"
    words = [f"word{i} " for i in range(80)]
    fake_model.script(cid, reply(text(*words), delay=0.1), text("and the rest."))
    assert (
        await post_event(gateway, event(message_event(chat, "U1", "talk", ts=ts)))
    ).status_code == 200
    # The reply has begun in Slack: kill the worker that streams it.
    await replies(slack, chat, ts)
    slack_stack.wait_polling(slack_stack.replace_worker())
    notice = "(My reply was interrupted by a restart. Please ask again if you still need it.)"
    await final_text(slack, chat, ts, notice)
    await turn_ended(gateway, cid)
    posted = [m for m in slack.posted(chat) if m.thread_ts == ts]
    # The partial as the dead worker left it, then the notice once: never a second partial.
    assert len(posted) == 2, [m.text for m in posted]
    assert posted[0].text.startswith("word0") and "and the rest." not in posted[0].text
    assert posted[1].text == notice
