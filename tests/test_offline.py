"""With no model configured, the bundled agent answers through the offline model."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests._stack import Stack, stack_env
from think._embedded import Services


@pytest.fixture(scope="module")
def offline_stack(services: Services, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    logs = tmp_path_factory.mktemp("offline")
    env = stack_env(
        database_url=services.database_url,
        temporal_address=services.temporal_address,
        task_queue="think-offline",
        agents="examples.assistant:Assistant",
        model_url=None,  # no OPENAI_BASE_URL, no OPENAI_API_KEY
        home=logs,
    )
    env.pop("THINK_AGENTS")  # and the default agents: the bundled example
    stack = Stack(env=env, logs=logs)
    try:
        stack.start_worker()
        stack.start_api()
        yield stack
    finally:
        stack.stop()


async def test_offline_model_says_so(offline_stack: Stack, cid: str) -> None:
    async with httpx.AsyncClient(base_url=offline_stack.api_url, timeout=30) as api:
        turn = (
            await api.post(
                f"/v1/agents/assistant/conversations/{cid}/turns",
                json={"input": "Hello!", "mode": "wait"},
            )
        ).json()
        assert turn["status"] == "completed", turn
        answer = turn["message"]["parts"][-1]["text"]
        assert "offline model" in answer
        assert "You said: Hello!" in answer
        stored = (await api.get(f"/v1/agents/assistant/conversations/{cid}/messages")).json()
        assert stored["messages"][-1]["parts"][-1]["text"] == answer
