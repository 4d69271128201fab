"""Telegram beyond plain answers: approvals decided with the chat's buttons, the messenger
context tools see, attachments within and over the limit, a scheduled task's notice, and a
declaration without a verification posture."""

from __future__ import annotations

import base64
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests._fake_telegram import FakeTelegram, button_press, private_message, user
from tests._stack import ROOT, Stack
from tests._waits import eventually
from tests.messenger_agents import NOTICE_TARGET, Chatty, Strict, Unverified
from tests.messengers._helpers import post_update
from tests.messengers.test_telegram import replied, settled
from think.agent import AgentRegistry
from think.messenger_turns import check_registry
from think.messengers import MessengerConfigError
from think.testing import FakeOpenAIServer, error, text, tool_call
from think.turns._service import ThinkService


async def test_an_approval_pressed_in_the_chat_completes_the_turn_and_a_second_press_is_refused(
    gateway: httpx.AsyncClient,
    tg: FakeTelegram,
    service: ThinkService,
    fake_model: FakeOpenAIServer,
    chat: int,
) -> None:
    cid = f"telegram:{chat}"
    fake_model.script(
        cid, tool_call("delete_file", {"path": "notes.txt"}), text("Deleted notes.txt for you.")
    )
    assert (
        await post_update(gateway, private_message(chat, "delete notes.txt"))
    ).status_code == 200

    async def buttons() -> list[dict[str, str]] | None:
        for call in tg.of("sendMessage", str(chat)):
            markup = call.params.get("reply_markup")
            if markup:
                return list(markup["inline_keyboard"][0])
        return None

    approve, deny = await eventually(buttons, within=30)
    assert (approve["text"], deny["text"]) == ("Approve", "Deny")
    approval_id = approve["callback_data"].removeprefix("a:")
    assert deny["callback_data"] == f"d:{approval_id}"
    [asked] = [c for c in tg.of("sendMessage", str(chat)) if c.params.get("reply_markup")]
    assert "`delete_file`" in asked.params["text"] and '"path": "notes.txt"' in asked.params["text"]
    posted = tg.messages
    message_id = next(i for (c, i), t in posted.items() if c == str(chat) and "Approval" in t)
    ada = user(chat, "Ada")
    press = button_press(chat, message_id, approve["callback_data"], ada)
    assert (await post_update(gateway, press)).status_code == 200
    texts = await replied(tg, chat, "Deleted notes\\.txt for you\\.")
    assert texts[-1] == "Deleted notes\\.txt for you\\."  # below the buttons, in the same chat
    assert [c.params["text"] for c in tg.of("answerCallbackQuery")][-1] == "Approved."
    again = button_press(chat, message_id, deny["callback_data"], ada)
    assert (await post_update(gateway, again)).status_code == 200
    assert [c.params["text"] for c in tg.of("answerCallbackQuery")][-1] == "Already decided."
    assert await settled(service, cid, 1) == ["completed"]
    conversation = service.conversation(Chatty, cid)
    [answer] = [m for m in await conversation.messages() if m.role == "assistant"]
    [call] = [p for p in answer.parts if p.get("type") == "tool-delete_file"]
    assert call["state"] == "output-available" and call["output"] == "deleted notes.txt"
    assert call["approval"]["approved"] is True


async def test_only_the_approvers_chat_user_may_decide(
    gateway: httpx.AsyncClient,
    tg: FakeTelegram,
    service: ThinkService,
    fake_model: FakeOpenAIServer,
    chat: int,
) -> None:
    cid = f"telegram:{chat}"
    fake_model.script(cid, tool_call("delete_file", {"path": "a.txt"}), text("Gone."))
    update = private_message(chat, "delete a.txt")
    assert (await post_update(gateway, update, agent="tg_strict")).status_code == 200

    async def button() -> str | None:
        for call in tg.of("sendMessage", str(chat)):
            if markup := call.params.get("reply_markup"):
                return str(markup["inline_keyboard"][0][0]["callback_data"])
        return None

    data = await eventually(button, within=30)
    stranger, lead = user(chat, "Eve"), user(4242, "Lead")
    press = button_press(chat, 1, data, stranger)
    assert (await post_update(gateway, press, agent="tg_strict")).status_code == 200
    refusal = tg.of("answerCallbackQuery")[-1].params["text"]
    assert (
        refusal
        == "You may not decide this (telegram:" + str(chat) + " is not among the approvers)."
    )
    press = button_press(chat, 1, data, lead)
    assert (await post_update(gateway, press, agent="tg_strict")).status_code == 200
    assert tg.of("answerCallbackQuery")[-1].params["text"] == "Approved."
    await replied(tg, chat, "Gone\\.")
    conversation = service.conversation(Strict, cid)
    [answer] = [m for m in await conversation.messages() if m.role == "assistant"]
    [call] = [p for p in answer.parts if p.get("type") == "tool-delete_file"]
    assert call["output"] == "deleted a.txt"


async def test_a_failed_turn_posts_the_generic_message_and_keeps_the_details_in_the_logs(
    gateway: httpx.AsyncClient,
    tg: FakeTelegram,
    service: ThinkService,
    fake_model: FakeOpenAIServer,
    chat: int,
) -> None:
    cid = f"telegram:{chat}"
    fake_model.script(cid, error(400, "secret internal detail: table xyz is corrupt"))
    assert (await post_update(gateway, private_message(chat, "break"))).status_code == 200
    texts = await replied(tg, chat, "something went wrong")
    assert texts == ["Sorry, something went wrong while answering\\. Please try again\\."]
    assert await settled(service, cid, 1) == ["failed"]


async def test_tools_see_the_messenger_context(
    gateway: httpx.AsyncClient,
    tg: FakeTelegram,
    service: ThinkService,
    fake_model: FakeOpenAIServer,
    chat: int,
) -> None:
    cid = f"telegram:{chat}"
    fake_model.script(cid, tool_call("where_am_i", {}), text("Found it."))
    sender = user(chat, "Grace", "Hopper")
    update = private_message(chat, "where are we?", sender=sender)
    assert (await post_update(gateway, update)).status_code == 200
    await replied(tg, chat, "Found it")
    conversation = service.conversation(Chatty, cid)
    [answer] = [m for m in await conversation.messages() if m.role == "assistant"]
    [call] = [p for p in answer.parts if p.get("type") == "tool-where_am_i"]
    assert call["output"] == f"telegram chat {chat} for Grace Hopper"


async def test_a_5_mb_photo_reaches_the_model_and_one_over_the_limit_is_refused_with_a_note(
    gateway: httpx.AsyncClient,
    tg: FakeTelegram,
    service: ThinkService,
    fake_model: FakeOpenAIServer,
    chat: int,
) -> None:
    cid = f"telegram:{chat}"
    five = b"\xff\xd8\xff" + os.urandom(5_000_000 - 3)
    tg.add_file(f"five-{chat}", five)
    photo = [{"file_id": f"five-{chat}", "file_unique_id": "u5", "width": 9, "height": 9}]
    update = private_message(chat, "", photo=photo, caption="what is this?")
    assert (await post_update(gateway, update)).status_code == 200
    await replied(tg, chat, "echo: what is this?")
    [request] = fake_model.requests(cid)
    [content] = [m["content"] for m in request["body"]["messages"] if m["role"] == "user"]
    [image] = [c for c in content if c["type"] == "image_url"]
    head, data = image["image_url"]["url"].split(",", 1)
    assert head == "data:image/jpeg;base64"
    assert base64.b64decode(data) == five

    seven = f"seven-{chat}"
    tg.add_file(seven, b"\xff\xd8\xff" + bytes(7_000_000))
    big = [
        {"file_id": seven, "file_unique_id": "u7", "width": 9, "height": 9, "file_size": 7_000_000}
    ]
    update = private_message(chat, "", photo=big, caption="and this one?")
    assert (await post_update(gateway, update)).status_code == 200
    texts = await replied(tg, chat, "and this one?")
    [note] = [t for t in texts if t.startswith("I could not read")]
    assert "over the 6,000,000\\-byte limit" in note
    assert [c for c in tg.of("download") if c.params["file_id"] == seven] == []
    assert await settled(service, cid, 2) == ["completed", "completed"]

    # A file Telegram cannot give (getFile refuses it): the message is answered, and says so.
    lost = {"file_id": "gone", "file_unique_id": "ug", "file_name": "lost.pdf"}
    update = private_message(chat, "", document=lost, caption="and the pdf?")
    assert (await post_update(gateway, update)).status_code == 200
    texts = await replied(tg, chat, "could not be read: lost\\.pdf")
    assert await settled(service, cid, 3) == ["completed"] * 3


async def test_a_scheduled_task_posts_a_notice_into_the_thread_and_the_transcript(
    gateway: httpx.AsyncClient, tg_stack: Stack, tg: FakeTelegram, service: ThinkService, chat: int
) -> None:
    cid = f"telegram:{chat}"
    assert (await post_update(gateway, private_message(chat, "subscribe me"))).status_code == 200
    await replied(tg, chat, "echo: subscribe me")
    (Path(tg_stack.env["THINK_HOME"]) / NOTICE_TARGET).write_text(cid)
    triggered = await gateway.post("/v1/agents/tg_chatty/schedules/digest/trigger")
    assert triggered.status_code == 202, triggered.text
    texts = await replied(tg, chat, "Daily digest")
    assert texts == ["echo: subscribe me", "Daily digest: all builds are green\\."]
    conversation = service.conversation(Chatty, cid)
    last = (await conversation.messages())[-1]
    assert last.role == "assistant"
    assert last.parts == [{"type": "text", "text": "Daily digest: all builds are green."}]


def test_a_declaration_without_a_verification_posture_stops_the_worker(stack: Stack) -> None:
    with pytest.raises(MessengerConfigError, match="no verification posture"):
        check_registry(AgentRegistry([Unverified]))
    env = {**stack.env, "THINK_AGENTS": "tests.messenger_agents:Unverified"}
    done = subprocess.run(
        [sys.executable, "-m", "think", "worker"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    assert "no verification posture" in done.stderr + done.stdout
    assert "secret_token_env" in done.stderr + done.stdout
