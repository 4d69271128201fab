"""Messenger latency: the time from a Telegram webhook's POST to the reply's first words in
the chat (the fake Bot API's `sendMessage`), and to its first edit (`editMessageText`), on a
local deployment (one worker, one gateway, the scripted model streaming 30 words 50 ms apart).

Two agents: `tg_chatty` with the default burst window (`messenger_concurrency` 0.6 s: a
message waits that long for others of its burst) and `tg_prompt` with none.

    python -m bench.messengers [--turns 20]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

import httpx

from bench._stack import local_stack
from tests._fake_telegram import FakeTelegram, private_message
from tests.messenger_agents import API_ENV, SECRET_ENV, TOKEN_ENV
from think.testing import FakeOpenAIServer, reply, text

SECRET = "bench-secret"
WORDS = [f"w{i} " for i in range(30)]


async def one(
    client: httpx.AsyncClient, tg: FakeTelegram, model: FakeOpenAIServer, agent: str, chat: int
) -> tuple[float, float]:
    model.script(f"telegram:{chat}", reply(text(*WORDS), delay=0.05))
    started = time.monotonic()
    answer = await client.post(
        f"/v1/messengers/{agent}/telegram/webhook",
        json=private_message(chat, "hello"),
        headers={"X-Telegram-Bot-Api-Secret-Token": SECRET},
    )
    answer.raise_for_status()
    sent = edited = None
    while edited is None:
        if sent is None and (calls := tg.of("sendMessage", str(chat))):
            sent = calls[0].at - started
        if calls := tg.of("editMessageText", str(chat)):
            edited = calls[0].at - started
        await asyncio.sleep(0.005)
    assert sent is not None
    return sent, edited


def summary(values: list[float]) -> str:
    ordered = sorted(values)
    p95 = ordered[max(0, round(0.95 * len(ordered)) - 1)]
    return f"p50 {statistics.median(ordered) * 1000:.0f} ms, p95 {p95 * 1000:.0f} ms"


async def measure(api_url: str, tg: FakeTelegram, model: FakeOpenAIServer, turns: int) -> None:
    async with httpx.AsyncClient(base_url=api_url, timeout=60) as client:
        for n, agent in enumerate(("tg_prompt", "tg_chatty")):
            base = 1000 * (n + 1)  # a chat of its own per turn
            await one(client, tg, model, agent, base)  # warm: clients, getMe
            results = [await one(client, tg, model, agent, base + 1 + i) for i in range(turns)]
            print(
                f"{agent}: webhook → first words {summary([r[0] for r in results])}; "
                f"→ first edit {summary([r[1] for r in results])} ({turns} turns)"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, default=20)
    args = parser.parse_args()
    with FakeTelegram() as tg:
        env = {TOKEN_ENV: tg.token, SECRET_ENV: SECRET, API_ENV: tg.api_url}
        agents = "tests.messenger_agents:Chatty,tests.messenger_agents:Prompt"
        with local_stack(agents=agents, env=env) as (stack, model):
            assert model is not None
            stack.wait_polling(next(p for p in stack.processes if p.name == "worker"))
            asyncio.run(measure(stack.api_url, tg, model, args.turns))


if __name__ == "__main__":
    main()
