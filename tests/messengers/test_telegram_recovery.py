"""Recovery-aware delivery: the worker delivering a reply is SIGKILLed, as a crash would,
and another takes over. Before the reply began, it is delivered once; after it began, the
interruption notice is posted instead of a second partial."""

from __future__ import annotations

import httpx

from tests._fake_telegram import FakeTelegram, private_message
from tests._stack import Stack
from tests._waits import eventually
from tests.messengers._helpers import post_update
from tests.messengers.test_telegram import replied, settled
from think.storage import TERMINAL_STATUSES, messenger_store
from think.testing import FakeOpenAIServer, reply, stall, text
from think.turns._service import ThinkService

WORDS = [f"word{i} " for i in range(40)]


def kill_worker(stack: Stack) -> None:
    stack.wait_polling(stack.replace_worker())


async def turn_ended(service: ThinkService, cid: str) -> None:
    [row] = await messenger_store.deliveries_of(service.store.db, cid)
    assert row.turn_id is not None

    async def check() -> bool:
        turn = await service.store.get_turn(row.turn_id or "")
        return turn is not None and turn.status in TERMINAL_STATUSES

    await eventually(check, within=60)


async def test_a_worker_killed_before_the_reply_began_delivers_it_once(
    gateway: httpx.AsyncClient,
    tg_stack: Stack,
    tg: FakeTelegram,
    service: ThinkService,
    fake_model: FakeOpenAIServer,
    chat: int,
) -> None:
    cid = f"telegram:{chat}"
    fake_model.script(cid, reply(stall(60), text("never shown")), text("Recovered answer, once."))
    assert (await post_update(gateway, private_message(chat, "slow one"))).status_code == 200

    async def asked() -> bool:
        return fake_model.calls(cid) >= 1

    await eventually(asked, within=30)
    assert tg.of("sendMessage", str(chat)) == []
    kill_worker(tg_stack)
    texts = await replied(tg, chat, "Recovered answer")
    assert texts == ["Recovered answer, once\\."]
    assert await settled(service, cid, 1) == ["completed"]
    await turn_ended(service, cid)
    assert len(tg.of("sendMessage", str(chat))) == 1


async def test_a_worker_killed_after_the_reply_began_posts_one_interruption_notice(
    gateway: httpx.AsyncClient,
    tg_stack: Stack,
    tg: FakeTelegram,
    service: ThinkService,
    fake_model: FakeOpenAIServer,
    chat: int,
) -> None:
    cid = f"telegram:{chat}"
    fake_model.script(cid, reply(text(*WORDS), delay=0.1), text("the rest."))
    assert (await post_update(gateway, private_message(chat, "long one"))).status_code == 200

    async def began() -> bool:
        return bool(tg.of("sendMessage", str(chat)))

    await eventually(began, within=30)
    kill_worker(tg_stack)
    texts = await replied(tg, chat, "interrupted by a restart")
    assert await settled(service, cid, 1) == ["interrupted"]
    await turn_ended(service, cid)
    sent = tg.of("sendMessage", str(chat))
    assert len(sent) == 2, [c.params["text"] for c in sent]  # the partial, then the notice
    partial, notice = tg.texts(str(chat))
    assert partial.startswith("word0") and "interrupted" not in partial
    assert notice == (
        "\\(My reply was interrupted by a restart\\. Please ask again if you still need it\\.\\)"
    )
    assert texts[-1] == notice
