"""Telegram, end to end: webhooks posted to the gateway as Telegram posts them, turns on a
real worker against the scripted model, replies sent to a fake Bot API server that checks
MarkdownV2 and rate-limits edits as Telegram does."""

from __future__ import annotations

import asyncio

import httpx
from temporalio.client import Client

from tests._fake_telegram import (
    FakeTelegram,
    group_message,
    next_update_id,
    private_message,
    user,
)
from tests._replay import replayed
from tests._waits import eventually
from tests.messenger_agents import Bursty, Chatty, Shared
from tests.messengers._helpers import post_update
from think.storage import messenger_store
from think.testing import FakeOpenAIServer, reply, text
from think.turns._service import ThinkService
from think.workflows.names import delivery_workflow_id


async def replied(tg: FakeTelegram, chat: int | str, needle: str) -> list[str]:
    """The chat's messages once one of them holds `needle`."""

    async def check() -> list[str] | None:
        texts = tg.texts(str(chat))
        return texts if any(needle in t for t in texts) else None

    return await eventually(check, within=30)


async def stages(service: ThinkService, conversation_id: str) -> list[str]:
    return [d.stage for d in await messenger_store.deliveries_of(service.store.db, conversation_id)]


async def settled(service: ThinkService, conversation_id: str, count: int) -> list[str]:
    """The conversation's delivery stages once `count` deliveries have all ended."""

    async def check() -> list[str] | None:
        found = await stages(service, conversation_id)
        ended = {"completed", "merged", "interrupted", "failed"}
        return found if len(found) == count and set(found) <= ended else None

    return await eventually(check, within=30)


async def test_a_direct_message_is_answered_in_its_chat(
    gateway: httpx.AsyncClient,
    tg: FakeTelegram,
    service: ThinkService,
    temporal: Client,
    chat: int,
) -> None:
    answer = await post_update(gateway, private_message(chat, "hello there, bot."))
    assert answer.status_code == 200, answer.text
    texts = await replied(tg, chat, "echo: hello there, bot")
    assert texts == ["echo: hello there, bot\\."]  # MarkdownV2, escaped
    assert await settled(service, f"telegram:{chat}", 1) == ["completed"]
    [sent] = tg.of("sendMessage", str(chat))
    assert sent.params["parse_mode"] == "MarkdownV2"
    assert "message_thread_id" not in sent.params
    # The delivery's workflow: one activity, its history replayed against today's code.
    [delivery] = await messenger_store.deliveries_of(service.store.db, f"telegram:{chat}")
    handle = temporal.get_workflow_handle(delivery_workflow_id(delivery.id))
    assert await handle.result() == "completed"
    await replayed(handle, "messenger-delivery")


async def test_a_mention_in_a_group_topic_is_answered_in_that_topic_and_subscribes_it(
    gateway: httpx.AsyncClient, tg: FakeTelegram, service: ThinkService, chat: int
) -> None:
    group, ada = -(10**12) - chat, user(chat, "Ada", "Lovelace")
    quiet = group_message(group, "nobody asked the bot", ada, topic=9)
    assert (await post_update(gateway, quiet)).status_code == 200
    asked = group_message(group, "what is 2+2?", ada, mention=True, topic=7)
    assert (await post_update(gateway, asked)).status_code == 200
    await replied(tg, group, "what is 2\\+2?")
    [sent] = tg.of("sendMessage", str(group))
    assert sent.params["message_thread_id"] == 7
    # The topic is subscribed now: a later message in it reaches the model unmentioned.
    later = group_message(group, "and 3+3?", ada, topic=7)
    assert (await post_update(gateway, later)).status_code == 200
    await replied(tg, group, "and 3\\+3?")
    assert await settled(service, f"telegram:{group}:7", 2) == ["completed", "completed"]
    # The unmentioned message in another topic made no conversation and no turn.
    assert await stages(service, f"telegram:{group}:9") == []
    assert all(c.params.get("message_thread_id") == 7 for c in tg.of("sendMessage", str(group)))


async def test_a_group_conversation_tells_the_model_who_said_what(
    gateway: httpx.AsyncClient, tg: FakeTelegram, service: ThinkService, chat: int
) -> None:
    group = -(10**12) - chat
    ada, bob = user(chat, "Ada", "Lovelace"), user(chat + 1, "Bob")
    first = group_message(group, "I think it is blue.", ada, mention=True)
    assert (await post_update(gateway, first)).status_code == 200
    await replied(tg, group, "blue")
    second = group_message(group, "No, it is green.", bob, mention=True)
    assert (await post_update(gateway, second)).status_code == 200
    await replied(tg, group, "green")
    conversation = service.conversation(Chatty, f"telegram:{group}")
    said = [
        p["text"]
        for m in await conversation.messages()
        if m.role == "user"
        for p in m.parts
        if p.get("type") == "text"
    ]
    assert said == [
        "[Ada Lovelace]: @think_test_bot I think it is blue.",
        "[Bob]: @think_test_bot No, it is green.",
    ]


async def test_a_burst_of_three_messages_is_answered_once(
    gateway: httpx.AsyncClient, tg: FakeTelegram, service: ThinkService, chat: int
) -> None:
    # `tg_bursty`'s window is 2 s, wide enough for a loaded machine to post three updates in.
    for words in ("first thing", "second thing", "third thing"):
        answer = await post_update(gateway, private_message(chat, words), agent="tg_bursty")
        assert answer.status_code == 200
    await replied(tg, chat, "echo: third thing")
    found = await settled(service, f"telegram:{chat}", 3)
    assert sorted(found) == ["completed", "merged", "merged"]
    assert len(tg.of("sendMessage", str(chat))) == 1
    conversation = service.conversation(Bursty, f"telegram:{chat}")
    roles = [m.role for m in await conversation.messages()]
    assert roles == ["user", "user", "user", "assistant"]


async def test_a_forged_secret_is_refused_and_nothing_is_stored(
    gateway: httpx.AsyncClient, tg: FakeTelegram, service: ThinkService, chat: int
) -> None:
    db = service.store.db
    before = await messenger_store.count_events(db, "default", "tg_chatty", "telegram")
    for secret in ("forged", None, "s3cret-token_valuE"):
        answer = await post_update(gateway, private_message(chat, "let me in"), secret=secret)
        assert answer.status_code == 401
        assert answer.headers["content-type"].startswith("application/problem+json")
        assert answer.json()["status"] == 401
    after = await messenger_store.count_events(db, "default", "tg_chatty", "telegram")
    assert after == before
    assert await stages(service, f"telegram:{chat}") == []
    assert tg.of("sendMessage", str(chat)) == []


async def test_unknown_agent_or_messenger_is_404(gateway: httpx.AsyncClient, chat: int) -> None:
    update = private_message(chat, "hi")
    assert (await post_update(gateway, update, agent="nobody")).status_code == 404
    answer = await gateway.post("/v1/messengers/tg_chatty/slack/webhook", json=update)
    assert answer.status_code == 404
    assert "slack" in answer.json()["detail"]


async def test_a_webhook_storm_of_one_update_is_answered_once(
    gateway: httpx.AsyncClient, tg: FakeTelegram, service: ThinkService, chat: int
) -> None:
    update = private_message(chat, "only once please", update_id=next_update_id())
    answers = await asyncio.gather(*(post_update(gateway, update) for _ in range(20)))
    assert [a.status_code for a in answers] == [200] * 20
    await replied(tg, chat, "echo: only once please")
    assert await settled(service, f"telegram:{chat}", 1) == ["completed"]
    # A retry long after: 200, and nothing new.
    assert (await post_update(gateway, update)).status_code == 200
    assert await stages(service, f"telegram:{chat}") == ["completed"]
    assert len(tg.of("sendMessage", str(chat))) == 1
    conversation = service.conversation(Chatty, f"telegram:{chat}")
    assert [m.role for m in await conversation.messages()] == ["user", "assistant"]


async def test_a_whole_reply_is_sent_once_complete_and_long_ones_are_split(
    gateway: httpx.AsyncClient,
    tg: FakeTelegram,
    service: ThinkService,
    fake_model: FakeOpenAIServer,
    chat: int,
) -> None:
    paragraph = "A line of words that is long enough. " * 40
    fake_model.script(f"telegram:{chat}", text("\n\n".join([paragraph] * 7)))
    answer = await post_update(gateway, private_message(chat, "essay"), agent="tg_whole")
    assert answer.status_code == 200
    await settled(service, f"telegram:{chat}", 1)
    sent = tg.of("sendMessage", str(chat))
    assert len(sent) >= 3 and all(len(c.params["text"]) <= 4096 for c in sent)
    assert tg.of("editMessageText", str(chat)) == []


async def test_conversation_self_feeds_one_conversation_and_answers_each_chat(
    gateway: httpx.AsyncClient, tg: FakeTelegram, service: ThinkService, chat: int
) -> None:
    other = chat + 1
    first = private_message(chat, "remember blue")
    assert (await post_update(gateway, first, agent="tg_shared")).status_code == 200
    assert await replied(tg, chat, "echo: remember blue") == ["echo: remember blue"]
    second = private_message(other, "what colour?")
    assert (await post_update(gateway, second, agent="tg_shared")).status_code == 200
    assert await replied(tg, other, "echo: what colour?") == ["echo: what colour?"]
    conversation = service.conversation(Shared, "telegram")
    said = [p["text"] for m in await conversation.messages() for p in m.parts if "text" in p]
    assert said[-4:] == [
        "remember blue",
        "echo: remember blue",
        "what colour?",
        "echo: what colour?",
    ]


async def test_a_streamed_reply_past_the_limit_continues_in_a_second_message(
    gateway: httpx.AsyncClient,
    tg: FakeTelegram,
    service: ThinkService,
    fake_model: FakeOpenAIServer,
    chat: int,
) -> None:
    words = [f"w{i}-x. " for i in range(900)]  # ~9,500 characters once escaped
    fake_model.script(f"telegram:{chat}", reply(text(*words), delay=0.002))
    assert (await post_update(gateway, private_message(chat, "a lot"))).status_code == 200
    assert await settled(service, f"telegram:{chat}", 1) == ["completed"]
    texts = tg.texts(str(chat))
    assert len(texts) == 3 and all(len(t) <= 4096 for t in texts)
    shown = " ".join(texts).replace("\\", "")
    assert shown.split() == [w.strip() for w in words]
    assert tg.of("editMessageText", str(chat))  # it streamed by edits
