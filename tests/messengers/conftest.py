"""The messenger tests' own stack: a worker and a gateway hosting the Telegram agents
(`tests/messenger_agents.py`), on their own task queue, against a fake Bot API server."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest

from tests._fake_telegram import FakeTelegram
from tests._stack import Stack, own_stack
from tests.messenger_agents import API_ENV, SECRET_ENV, TOKEN_ENV
from tests.messengers._helpers import SECRET

AGENTS = ("Chatty", "Whole", "Bursty", "Strict", "Shared")


@pytest.fixture(scope="module")
def tg() -> Iterator[FakeTelegram]:
    with FakeTelegram() as fake:
        yield fake


@pytest.fixture(scope="module")
def tg_stack(
    stack: Stack, tg: FakeTelegram, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stack]:
    logs = tmp_path_factory.mktemp("telegram")
    env = {
        **stack.env,
        "THINK_TASK_QUEUE": f"think-tg-{secrets.token_hex(3)}",
        "THINK_AGENTS": ",".join(f"tests.messenger_agents:{a}" for a in AGENTS),
        "THINK_HOME": str(logs),
        TOKEN_ENV: tg.token,
        SECRET_ENV: SECRET,
        API_ENV: tg.api_url,
    }
    with own_stack(env, logs) as own:
        yield own


@pytest.fixture
async def gateway(tg_stack: Stack) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=tg_stack.api_url, timeout=60) as client:
        yield client


@pytest.fixture
def chat() -> int:
    """A fresh private chat (a Telegram user id) per test."""
    return 10_000_000 + secrets.randbelow(80_000_000)
