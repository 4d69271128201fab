"""The same conversation on every API an endpoint may speak (Chat Completions, the Responses
API, Anthropic's Messages API), each against its fake, through the whole stack: a tool call that
waits for a person's approval and then runs, and a turn cancelled mid-answer that keeps what
was said. (Plain answers, parallel tools, reasoning and structured output are in each API's own
module; a worker killed mid-answer is in tests/durability/test_crash_recovery.py.)"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests._sse import chunks, deltas, read_stream, read_until, until_terminal
from tests._turn_helpers import until_status
from think.testing import FakeOpenAIServer, reply, text, tool_call

APIS = {
    "chat": ("scripted-model", "fake_model"),
    "responses": ("gpt/gpt-4.1", "fake_responses"),
    "anthropic": ("claude/claude-sonnet-4-5", "fake_anthropic"),
}
WORDS = [f"w{i} " for i in range(60)]


@pytest.fixture(params=list(APIS))
def on_api(request: pytest.FixtureRequest) -> tuple[str, FakeOpenAIServer]:
    """The model to name, and the fake that answers for it."""
    model, fake = APIS[request.param]
    server: FakeOpenAIServer = request.getfixturevalue(fake)
    return model, server


async def submit(api: httpx.AsyncClient, cid: str, model: str, words: str) -> dict[str, Any]:
    url = f"/v1/agents/switchable/conversations/{cid}/turns"
    body = {"input": words, "body": {"settings": {"model": model}}}
    response = await api.post(url, json=body)
    assert response.status_code == 202, response.text
    turn: dict[str, Any] = response.json()
    return turn


async def test_an_approval_then_the_tool_runs(
    api: httpx.AsyncClient, on_api: tuple[str, FakeOpenAIServer], cid: str
) -> None:
    model, fake = on_api
    fake.script(cid, tool_call("delete_file", {"path": "/tmp/x"}, id="call_del"), text("Gone."))
    turn = await submit(api, cid, model, "delete it")
    paused = await until_status(api, turn["status_url"], {"awaiting_approval", "error"})
    assert paused["status"] == "awaiting_approval", paused
    [pending] = paused["pending_approvals"]
    decided = await api.post(
        f"{turn['status_url']}/approvals/{pending['approval_id']}", json={"approved": True}
    )
    assert decided.status_code == 200, decided.text
    done = await until_terminal(api, turn["status_url"])
    assert done["status"] == "completed", done
    parts = done["message"]["parts"]
    [call] = [p for p in parts if p["type"] == "tool-delete_file"]
    assert call["output"] == "deleted /tmp/x" and call["approval"]["approved"] is True
    assert parts[-1]["text"] == "Gone."
    # The model was asked twice: for the call, then with its result, in its API's terms.
    assert fake.calls(cid) == 2
    assert "deleted /tmp/x" in str(fake.requests(cid)[1]["body"])


async def test_cancel_mid_answer_keeps_what_was_said(
    api: httpx.AsyncClient, on_api: tuple[str, FakeOpenAIServer], cid: str
) -> None:
    model, fake = on_api
    fake.script(cid, reply(text(*WORDS), delay=0.05))  # ~3 s of streaming
    turn = await submit(api, cid, model, "talk")
    await read_until(api, turn["stream_url"], deltas(5))
    cancelled = await api.post(f"{turn['status_url']}/cancel", json={"reason": "stop"})
    assert cancelled.status_code == 202, cancelled.text
    final = await until_terminal(api, turn["status_url"])
    assert final["status"] == "aborted", final
    partial = final["message"]["parts"][-1]["text"]
    assert 0 < len(partial) < len("".join(WORDS)) and "".join(WORDS).startswith(partial)
    _, events = await read_stream(api, turn["stream_url"])
    assert chunks(events)[-1] == {"type": "abort", "reason": "stop"}
