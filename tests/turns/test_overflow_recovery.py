"""Context-window overflow recovery, driven by a fake model that answers with the overflow
errors real providers send (the strings of tests/turns/test_overflow_classifier.py).

`recoverer` (tests/agents.py) recovers reactively with the bundled classifier assigned as its
hook; `forethought` also compacts proactively (before a step whose previous one read over 500
tokens, once a turn) and classifies through an overridden method. Both summarise with the
fake model and keep only the newest message.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from sqlalchemy import text as sql
from sqlalchemy.ext.asyncio import AsyncEngine

from tests._ai_sdk import NODE_DIR, reconstruct
from tests._logs import emitted, hook_calls
from tests._provider_errors import OVERFLOWS
from tests._sse import chunks, read_stream
from tests._stack import Stack
from tests._turn_helpers import sent, wait_turn
from tests.agents import Forethought, Recoverer
from think import (
    ChatErrorContext,
    ContextOverflow,
    Proactive,
    Think,
    default_context_overflow_classifier,
)
from think.exceptions import ModelError
from think.models import Usage
from think.sessions._compaction import SUMMARY_HEADER, SUMMARY_SYSTEM
from think.testing import FakeOpenAIServer, error, reply, text, tool_call

OVERFLOW = dict(OVERFLOWS)
LONG = "lorem ipsum dolor sit amet " * 15  # about 100 tokens a message


def history() -> list[dict[str, Any]]:
    """Four earlier messages: something to compact."""
    return [
        {"id": f"h{i}", "role": role, "parts": [{"type": "text", "text": f"{i} {LONG}"}]}
        for i, role in enumerate(["user", "assistant"] * 2)
    ]


async def with_history(api: httpx.AsyncClient, agent: str, cid: str) -> None:
    url = f"/v1/agents/{agent}/conversations/{cid}/messages"
    response = await api.post(url, json={"messages": history()})
    assert response.status_code in (200, 201), response.text


def answer(turn: dict[str, Any]) -> str:
    return "".join(p.get("text", "") for p in turn["message"]["parts"])


async def compactions(engine: AsyncEngine, cid: str) -> list[tuple[Any, ...]]:
    async with engine.connect() as db:
        rows = await db.execute(
            sql(
                "SELECT k.first_message_id, k.last_message_id, k.trigger, k.turn_id "
                "FROM compactions k JOIN conversations c ON c.uid = k.conversation_uid "
                "WHERE c.id = :cid ORDER BY k.id"
            ),
            {"cid": cid},
        )
        return [tuple(r) for r in rows]


@pytest.mark.parametrize("provider", ["OpenAI", "Anthropic", "Google Gemini"])
async def test_reactive_recovery_compacts_and_runs_the_step_again(
    api: httpx.AsyncClient,
    fake_model: FakeOpenAIServer,
    stack: Stack,
    engine: AsyncEngine,
    cid: str,
    provider: str,
) -> None:
    await with_history(api, "recoverer", cid)
    fake_model.script(cid, error(400, OVERFLOW[provider]), text("The gist."), text("Fits now."))
    turn = await wait_turn(api, "recoverer", cid, "the question")
    assert turn["status"] == "completed", turn
    assert answer(turn) == "Fits now."

    refused, summarising, retried = (sent(fake_model, cid, i) for i in range(3))
    assert [m["content"] for m in refused[1:]] == [m["parts"][0]["text"] for m in history()] + [
        "the question"
    ]
    assert summarising[0]["content"] == SUMMARY_SYSTEM
    assert retried == [
        {"role": "system", "content": "You are a test agent."},
        {"role": "user", "content": f"{SUMMARY_HEADER}\n\nThe gist."},
        {"role": "user", "content": "the question"},
    ]
    assert fake_model.calls(cid) == 3
    assert await compactions(engine, cid) == [("h0", "h3", "reactive", turn["turn_id"])]
    got = await emitted(stack, cid, "chat.turn.finished")
    [compacted] = [e for e in got if e.type == "chat.context.compacted"]
    assert compacted.trigger == "reactive" and compacted.turn_id == turn["turn_id"]
    assert (compacted.messages_before, compacted.messages_after) == (5, 2)
    # Storage keeps every message.
    stored = (await api.get(f"/v1/agents/recoverer/conversations/{cid}/messages")).json()
    assert [m["id"] for m in stored["messages"][:4]] == ["h0", "h1", "h2", "h3"]
    assert len(stored["messages"]) == 6


async def test_reactive_recovery_drops_the_partial_answer(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    """An overflow that arrives inside the stream, after some text: the retry starts over."""
    await with_history(api, "recoverer", cid)
    fake_model.script(
        cid,
        text("I was about to") + error(400, OVERFLOW["OpenAI"]),
        text("The gist."),
        text("Whole answer."),
    )
    turn = await wait_turn(api, "recoverer", cid, "the question")
    assert turn["status"] == "completed", turn
    assert turn["message"]["parts"] == [
        {"type": "step-start"},
        {"type": "text", "text": "Whole answer.", "state": "done"},
    ]
    body, events = await read_stream(api, turn["stream_url"])
    got = chunks(events)
    kinds = [c["type"] for c in got]
    compacted = next(c for c in got if c["type"] == "data-context-compacted")
    assert compacted["transient"] is True and compacted["data"]["trigger"] == "reactive"
    assert kinds.index("text-delta") < kinds.index("data-context-compacted")
    assert kinds.index("data-context-compacted") < kinds.index("reset-step")
    if (NODE_DIR / "node_modules" / "ai").exists():
        assert (await reconstruct(body))["message"] == turn["message"]


async def test_an_overflow_compaction_cannot_help_ends_in_a_clear_error(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, stack: Stack, cid: str
) -> None:
    """Nothing before the question to summarise: no retry, no summarising call."""
    fake_model.script(cid, error(400, OVERFLOW["Anthropic"]))
    turn = await wait_turn(api, "recoverer", cid, "the question")
    assert turn["status"] == "error", turn
    assert "no longer fits the model's context window" in turn["error"]
    assert "cannot shorten it" in turn["error"] and "prompt is too long" in turn["error"]
    assert fake_model.calls(cid) == 1
    [hook] = await hook_calls(stack, cid, "on_chat_error")
    assert hook["classification"] == "context_overflow"


async def test_an_overflow_without_reactive_recovery_ends_in_a_clear_error(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, stack: Stack, cid: str
) -> None:
    """`lookout` compacts proactively only: an overflow is classified, never retried."""
    await with_history(api, "lookout", cid)
    fake_model.script(cid, error(400, OVERFLOW["Google Gemini"]))
    turn = await wait_turn(api, "lookout", cid, "the question")
    assert turn["status"] == "error", turn
    assert "context_overflow.reactive is off" in turn["error"]
    assert fake_model.calls(cid) == 1
    [hook] = await hook_calls(stack, cid, "on_chat_error")
    assert hook["classification"] == "context_overflow"


async def test_reactive_recovery_is_bounded_by_max_retries(
    api: httpx.AsyncClient,
    fake_model: FakeOpenAIServer,
    stack: Stack,
    engine: AsyncEngine,
    cid: str,
) -> None:
    await with_history(api, "recoverer", cid)
    fake_model.script(
        cid,
        error(400, OVERFLOW["OpenAI"]),
        text("The gist."),
        error(400, OVERFLOW["Google Gemini"]),
        text("never asked for"),
    )
    turn = await wait_turn(api, "recoverer", cid, "the question")
    assert turn["status"] == "error", turn
    assert "max_retries" in turn["error"] and "input token count" in turn["error"]
    assert fake_model.calls(cid) == 3  # refused, summarised, refused again: no loop
    assert len(await compactions(engine, cid)) == 1
    [hook] = await hook_calls(stack, cid, "on_chat_error")
    assert hook["classification"] == "context_overflow"


async def test_a_classify_chat_error_method_drives_reactive_recovery(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    await with_history(api, "forethought", cid)
    fake_model.script(
        cid, error(400, OVERFLOW["Google Gemini"]), text("The gist."), text("Fits now.")
    )
    turn = await wait_turn(api, "forethought", cid, "the question")
    assert turn["status"] == "completed", turn
    assert answer(turn) == "Fits now."
    assert sent(fake_model, cid, 2)[1]["content"] == f"{SUMMARY_HEADER}\n\nThe gist."


async def test_proactive_compaction_before_a_step_near_the_window(
    api: httpx.AsyncClient,
    fake_model: FakeOpenAIServer,
    stack: Stack,
    engine: AsyncEngine,
    cid: str,
) -> None:
    await with_history(api, "forethought", cid)
    near = Usage(input_tokens=900, output_tokens=5)  # over 0.5 x 1,000
    fake_model.script(
        cid,
        reply(tool_call("add", {"a": 1, "b": 2}, id="c1"), usage=near),
        text("The gist."),
        reply(tool_call("add", {"a": 3, "b": 4}, id="c2"), usage=near),
        text("Done."),
    )
    turn = await wait_turn(api, "forethought", cid, "the question")
    assert turn["status"] == "completed", turn
    assert answer(turn) == "Done."
    # Step 1 read 900 tokens: step 2 came after a summary. Step 2 read 900 too, but the budget
    # (max_compactions=1) was spent: step 3 ran without another.
    assert fake_model.calls(cid) == 4
    assert sent(fake_model, cid, 1)[0]["content"] == SUMMARY_SYSTEM
    second = sent(fake_model, cid, 2)
    assert second[1] == {"role": "user", "content": f"{SUMMARY_HEADER}\n\nThe gist."}
    assert second[2] == {"role": "user", "content": "the question"}
    assert second[3]["tool_calls"][0]["id"] == "c1" and second[4]["role"] == "tool"
    assert sent(fake_model, cid, 3)[1] == second[1]
    assert await compactions(engine, cid) == [("h0", "h3", "proactive", turn["turn_id"])]
    got = await emitted(stack, cid, "chat.turn.finished")
    assert [e.trigger for e in got if e.type == "chat.context.compacted"] == ["proactive"]


# -- the configuration, without the stack ---------------------------------------------------


def test_the_bundled_classifier_is_a_function_and_assignable_as_the_hook() -> None:
    refusal = ModelError(f"HTTP 400: {OVERFLOW['OpenAI']}", retryable=False, status=400)
    ctx = ChatErrorContext(
        agent="a",
        conversation_id="c",
        turn_id="t",
        stage="model",
        user_message_persisted=True,
        partial_message_persisted=False,
    )
    assert default_context_overflow_classifier(refusal) == "context_overflow"
    assert default_context_overflow_classifier(refusal, ctx) == "context_overflow"
    assert Recoverer().classify_chat_error(refusal, ctx) == "context_overflow"  # assigned
    assert Forethought().classify_chat_error(refusal, ctx) == "context_overflow"  # a method
    assert Recoverer().classify_chat_error("slow down", ctx) is None
    assert Think().classify_chat_error(refusal, ctx) is None  # the default has no opinion


def test_context_overflow_settings() -> None:
    assert ContextOverflow() == ContextOverflow(reactive=False, max_retries=1, proactive=None)
    proactive = Proactive(max_input_tokens=200_000)
    assert (proactive.headroom, proactive.max_compactions, proactive.threshold) == (
        0.9,
        1,
        180_000,
    )
    for bad in ({"max_input_tokens": 0}, {"max_input_tokens": 10, "headroom": 1.5}):
        with pytest.raises(ValueError):
            Proactive.model_validate(bad)
    with pytest.raises(ValueError):
        ContextOverflow(max_retries=-1)
