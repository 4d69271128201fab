"""Slack latency: the time from a signed Events API POST (a DM) to the reply's first words in
Slack (the fake Web API's `chat.postMessage`), and to its first edit (`chat.update`), on a
local deployment (one worker, one gateway, the scripted model streaming 30 words 50 ms
apart). The agent is `slack_helper` (`messenger_concurrency = 0`: no burst window).

    python -m bench.messengers_slack [--turns 20]
"""

from __future__ import annotations

import argparse
import asyncio
import time

import httpx

from bench._stack import local_stack
from bench.messengers import summary
from tests._fake_slack import (
    BOT_TOKEN,
    SIGNING_SECRET,
    FakeSlack,
    event,
    fake_slack,
    message_event,
    next_ts,
    signed_headers,
)
from think.testing import FakeOpenAIServer, reply, text

AGENT = "slack_helper"
WORDS = [f"w{i} " for i in range(30)]


async def one(
    client: httpx.AsyncClient, slack: FakeSlack, model: FakeOpenAIServer, chat: str
) -> tuple[float, float]:
    ts = next_ts()
    model.script(f"slack:{chat}:{ts}", reply(text(*WORDS), delay=0.05))
    body = event(message_event(chat, "U1", "hello", ts=ts))
    started = time.monotonic()
    answer = await client.post(
        f"/v1/messengers/{AGENT}/slack/webhook",
        content=body,
        headers={"Content-Type": "application/json", **signed_headers(body)},
    )
    answer.raise_for_status()
    sent = edited = None
    while edited is None:
        if sent is None and (
            posts := [c for c in slack.calls_of("chat.postMessage") if c.params["channel"] == chat]
        ):
            sent = posts[0].at - started
        if edits := [c for c in slack.calls_of("chat.update") if c.params["channel"] == chat]:
            edited = edits[0].at - started
        await asyncio.sleep(0.005)
    assert sent is not None
    return sent, edited


async def measure(api_url: str, slack: FakeSlack, model: FakeOpenAIServer, turns: int) -> None:
    async with httpx.AsyncClient(base_url=api_url, timeout=60) as client:
        await one(client, slack, model, "DWARM")  # warm: clients, auth.test, users.info
        results = [await one(client, slack, model, f"DBENCH{i}") for i in range(turns)]
        print(
            f"{AGENT}: webhook → first words {summary([r[0] for r in results])}; "
            f"→ first edit {summary([r[1] for r in results])} ({turns} turns)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, default=20)
    args = parser.parse_args()
    with fake_slack(edit_interval=1.0) as slack:
        env = {
            "SLACK_TEST_API_URL": slack.api_url,
            "SLACK_TEST_BOT_TOKEN": BOT_TOKEN,
            "SLACK_TEST_SIGNING_SECRET": SIGNING_SECRET,
        }
        with local_stack(agents="tests.slack_agents:SlackHelper", env=env) as (stack, model):
            assert model is not None
            stack.wait_polling(next(p for p in stack.processes if p.name == "worker"))
            asyncio.run(measure(stack.api_url, slack, model, args.turns))


if __name__ == "__main__":
    main()
